"""``npusim bench`` case of lab 08: one training step of its small CNN through the PyTorch adapter.

``torch_train_step``: steps of :func:`npusim.torch.training.train` (batch 16, fp32 and fp16 compute), CPU
seconds of this process per step: ``simulated_s`` with every kernel simulated (``options.memo = False``),
``memo_s`` once the shapes have been seen (each convolution's profiles reused, its values replayed on the
host bit for bit: :mod:`npusim.torch.memo`), and PyTorch's own CPU step as the floor (``numpy_s``). The
two runs' losses and device times are asserted equal. Without PyTorch the case says so and passes.
"""

from __future__ import annotations

import time

from . import case, line

STEPS = 3


def _run(memo_on: bool, dtype, x, y) -> tuple[float, list, list]:
    import npusim.torch as nt
    from npusim.torch import memo, training

    nt.options.memo = memo_on
    memo.clear()
    model = nt.swap_modules(training.tiny_cnn(seed=0), compute_dtype=dtype)
    training.train(model, x, y, steps=1)           # the first step: every shape simulated (and memoised)
    c0 = time.process_time()
    run = training.train(model, x, y, steps=STEPS)
    return (time.process_time() - c0) / STEPS, run.losses, run.device_us


@case("torch_train_step")
def bench_torch_train_step(repeat: int) -> dict:
    """Lab 08's training step on the simulator: every kernel simulated vs the memo's replay (CPU s)."""
    try:
        import torch
    except ImportError as e:   # the adapter needs PyTorch; the rest of the bench does not
        return {"kernel": "torch_train_step", "skipped": f"PyTorch is not importable ({e})"}
    import npusim.torch as nt
    from npusim.torch import training

    torch.set_num_threads(1)
    x, y = training.shapes_dataset(64, seed=0)
    out = {}
    try:
        for name, dtype in (("fp32", None), ("fp16", torch.float16)):
            sim_s, sim_losses, sim_us = _run(False, dtype, x, y)
            memo_s, memo_losses, memo_us = _run(True, dtype, x, y)
            assert (sim_losses, sim_us) == (memo_losses, memo_us), f"{name}: the memo changed the training run"
            out[name] = {"simulated_s": round(sim_s, 3), "memo_s": round(memo_s, 3),
                         "speed_up": round(sim_s / memo_s, 1), "device_us": round(sim_us[-1], 2)}
    finally:
        nt.options.memo = True
    model = training.tiny_cnn(seed=0)
    c0 = time.process_time()
    training.pretrain(model, x, y, steps=STEPS)
    floor_s = (time.process_time() - c0) / STEPS
    return line("torch_train_step", out["fp32"]["memo_s"], floor_s, None, model="lab 08 tiny CNN, batch 16",
                **out)
