"""``npusim bench`` case of a whole model: ResNet-18 on the simulator, in lab 09's story setting and at batch 1.

``resnet18``: for :data:`npusim.model.story.STORY` (batch 8 at 224 x 224) and
:data:`~npusim.model.story.CONTRAST` (batch 1), the model as captured and after the graph passes
(:func:`npusim.model.story.story_runs`), every kernel simulated with numerics, timing and the sanitizer on,
as a learner runs it in lab 09 (the story setting with the race checker off, as the lab does). Printed per
setting: the conv kernels' chip utilisation (max, median),
the model's chip utilisation before and after the passes, the speed-up, and the wall (and process CPU)
seconds of the two runs. The memo of kernel profiles is cleared first, so every distinct kernel is
simulated once (repeated layers are reused, as in the lab). ``sim_s``: the batch-1 wall seconds; the
numpy floor: the float32 reference of the batch-1 graph (``nm.evaluate``). Progress goes to stderr.
"""

from __future__ import annotations

import time

from . import case, line

TARGET_SIM_S = 5.0
"""A learner's batch-1 inference (both runs) should take a few seconds on a 2-core machine."""


def _setting(setting, sanitize: str) -> tuple[dict, object]:
    from ..model.story import figures, story_runs

    t0, c0 = time.perf_counter(), time.process_time()
    before, after = story_runs(setting, progress=True, sanitize=sanitize)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    f = {k: round(v, 4) for k, v in figures(before, after).items()}
    return {"setting": setting.describe(), **f, "model_time_before_us": round(before.model_time_us, 1),
            "model_time_after_us": round(after.model_time_us, 1), "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2)}, after


@case("resnet18")
def bench_resnet18(repeat: int) -> dict:
    """ResNet-18 before and after the graph passes, in the story setting and at batch 1."""
    from ..model import evaluate, images, memo, optimize
    from ..model.resnet import resnet18
    from ..model.story import CONTRAST, STORY

    memo.clear()
    one, after1 = _setting(CONTRAST, "error")
    memo.clear()
    story, _ = _setting(STORY, "off")   # as lab 09 runs it
    x = images(CONTRAST.batch, CONTRAST.image)
    graph = optimize(resnet18(), input_shape=x.shape)
    t0 = time.perf_counter()
    ref = evaluate(graph, x)
    floor_s = time.perf_counter() - t0
    err = float(abs(after1.output - ref).max())
    assert err <= 2e-2 * max(1.0, float(abs(ref).max())), f"ResNet-18 on the simulator is off by {err}"
    return line("resnet18", one["wall_s"], floor_s, None, model="resnet18 224x224, captured and optimized",
                story=story, batch1=one, cpu_s=one["cpu_s"], target_sim_s=TARGET_SIM_S)
