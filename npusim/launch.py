"""Launching a kernel on ``block_dim`` blocks: functional execution, timing and sanitizer in one run.

Blocks run one after another in Python. Block ``b`` runs on physical core ``b % active_cores`` and
starts when that core's previous block ended, so a launch with more blocks than cores runs in waves.
Every core gets an equal share of the chip's GM bandwidth (:meth:`HardwareConfig.gm_rate`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .config import HardwareConfig, get_config
from .core import Core, run_on
from .errors import UsageError
from .pipes import PIPES
from .profile import Profile
from .tensor import GM_ALIGN, GlobalTensor, GmBuffer


def kernel(fn: Callable) -> Callable:
    """Mark a function as a kernel (``@npusim.kernel``). Any plain function can be launched; the mark
    documents intent and lets tools find kernels."""
    fn.__npusim_kernel__ = True
    return fn


@dataclass
class LaunchResult:
    """What :func:`launch` returns: the GM arrays after the kernel (by parameter name) and the profile."""

    outputs: dict[str, np.ndarray]
    profile: Profile

    def __getitem__(self, name: str) -> np.ndarray:
        return self.outputs[name]


def launch(kernel_fn: Callable, block_dim: int, *args: Any, config: HardwareConfig | str | None = None,
           sanitize: str = "error", **kwargs: Any) -> LaunchResult:
    """Run ``kernel_fn(*args, **kwargs)`` on ``block_dim`` blocks (``kernel<<<block_dim>>>(args)``).

    Numpy arrays among the arguments become :class:`GlobalTensor` in GM and are updated in place.
    ``sanitize``: ``"error"`` (default) raises on the first finding, ``"warn"`` turns recoverable
    findings into :class:`SanitizerWarning` and carries on as the hardware would, ``"off"`` skips the
    race checker (other checks stay).
    """
    cfg = get_config(config)
    if not isinstance(block_dim, (int, np.integer)) or block_dim < 1 or block_dim > 65535:
        raise UsageError(f"block_dim must be an int in 1..65535, got {block_dim!r}",
                         hint="launch(kernel, block_dim, *args): block_dim is the number of blocks, before the "
                              "kernel's arguments")
    block_dim = int(block_dim)
    try:
        bound = inspect.signature(kernel_fn).bind(*args, **kwargs)
    except TypeError as e:
        name = getattr(kernel_fn, "__name__", "kernel")
        raise UsageError(f"arguments do not match {name}: {e}",
                         hint=f"pass {name}{inspect.signature(kernel_fn)}'s arguments after block_dim") from None
    bound.apply_defaults()  # so that a keyword given after a skipped default keeps its own place
    check = sanitize != "off"
    gm: dict[str, GmBuffer] = {}
    addr = 0x10000000
    new_args, new_kwargs = [], {}
    for name, value in bound.arguments.items():
        if isinstance(value, np.ndarray):
            buf = GmBuffer(value, name, addr, check)
            gm[name] = buf
            addr += -(-max(buf.nbytes, 1) // GM_ALIGN) * GM_ALIGN
            value = GlobalTensor(buf)
        param = bound.signature.parameters[name]
        if param.kind == param.KEYWORD_ONLY:
            new_kwargs[name] = value
        elif param.kind == param.VAR_POSITIONAL:
            new_args.extend(value)
        elif param.kind == param.VAR_KEYWORD:
            new_kwargs.update(value)
        else:
            new_args.append(value)

    active = min(block_dim, cfg.num_cores)
    core_free = [0.0] * active
    busy = {p.msprof_name: 0.0 for p in PIPES}
    path_bytes: dict[str, int] = {}
    records: list[tuple] = []
    occupancy: list[tuple] = []
    reserved: dict[str, int] = {}
    block_start, block_end, block_reserved = [], [], []
    macs = 0
    cube_ideal = vec_ideal = 0.0
    vec_ops = 0
    cube_dtype = None
    for b in range(block_dim):
        phys = b % active
        block_start.append(core_free[phys])
        core = Core(cfg, b, block_dim, active, sanitize, t0=core_free[phys])
        prev = run_on(core)
        try:
            kernel_fn(*new_args, **new_kwargs)
            end = core.finish()
        finally:
            run_on(prev)
        core_free[phys] = end
        block_end.append(end)
        for p in PIPES:
            busy[p.msprof_name] += core.busy[p]
        for k, v in core.path_bytes.items():
            path_bytes[k] = path_bytes.get(k, 0) + v
        records.append(core.records)
        occupancy.append(core.occupancy)
        block_reserved.append({name: mem.top for name, mem in core.memories.items()})
        for name, mem in core.memories.items():
            reserved[name] = max(reserved.get(name, 0), mem.top)
        macs += core.cube_macs
        cube_ideal += core.cube_ideal_cycles
        vec_ops += core.vector_ops
        vec_ideal += core.vector_ideal_cycles
        cube_dtype = cube_dtype or core.cube_peak_dtype
    profile = Profile(
        kernel=getattr(kernel_fn, "__name__", "kernel"), config=cfg, block_dim=block_dim,
        total_cycles=max(core_free), block_start_cycles=block_start, block_end_cycles=block_end, pipe_busy_cycles=busy,
        path_bytes=path_bytes, cube_macs=macs, cube_ideal_cycles=cube_ideal, cube_dtype=cube_dtype,
        vector_ops=vec_ops, vector_ideal_cycles=vec_ideal, block_records=records,
        block_occupancy=occupancy, reserved_bytes=reserved, block_reserved_bytes=block_reserved)
    return LaunchResult({k: v.array for k, v in gm.items()}, profile)
