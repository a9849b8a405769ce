"""Launching a kernel on ``block_dim`` blocks: functional execution, timing and sanitizer in one run.

Blocks run one after another in Python. Block ``b`` runs on physical core ``b % active_cores`` and
starts when that core's previous block ended, so a launch with more blocks than cores runs in waves. On a
chip with separate Cube and Vector cores (``a2``) the kernel type says which cores those are
(:mod:`npusim.cores`): up to 48 AIV for a vector kernel, 24 AIC for a Cube kernel, an AIC and two AIV per
block for a mix kernel.
The cores share one L2 and one HBM budget (:mod:`npusim.memsys`); the L2 starts cold unless a cache is
passed on (``l2=``, or inside ``with npusim.shared_l2():``).
"""

from __future__ import annotations

import gc
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .config import HardwareConfig, get_config
from .chipsync import ChipSync
from .core import Core, run_on
from .cores import KernelTypeError, Plan, coupled_plan, plan as plan_launch
from .errors import UsageError
from .instructions._usage import from_type_error
from .l2 import L2Cache, current_shared
from .interleave import Interleaver
from .memsys import MemorySystem
from .pipes import PIPES
from .profile import Profile
from .progress import LaunchProgress
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
           sanitize: str = "error", l2: L2Cache | None = None, algorithmic_macs: int | None = None,
           auto_sync: bool = True, kernel_type: str | None = None, progress: bool | None = None,
           progress_title: str | None = None, **kwargs: Any) -> LaunchResult:
    """Run ``kernel_fn(*args, **kwargs)`` on ``block_dim`` blocks (``kernel<<<block_dim>>>(args)``).

    Numpy arrays among the arguments become :class:`GlobalTensor` in GM and are updated in place.
    ``sanitize``: ``"error"`` (default) raises on the first finding, ``"warn"`` turns recoverable
    findings into :class:`SanitizerWarning` and carries on as the hardware would, ``"off"`` skips the
    race checker (other checks stay). ``l2``: an :class:`npusim.l2.L2Cache` to start from and leave
    filled (default: the one of an enclosing :func:`npusim.shared_l2`, else a cold one).
    ``algorithmic_macs``: the operation's useful multiply-accumulates when the kernel's Mmads include
    padding or helper products (e.g. a convolution's zero channels), for ``Profile.mac_utilization``.
    ``auto_sync``: the compiler's ``--cce-auto-sync`` (on by default, as in kernel projects): the scalar
    unit's ``get_value``/``set_value`` get the V/MTE2/MTE3 <-> S flags the compiler inserts
    (:mod:`npusim.instructions.autosync`); ``False`` leaves every flag to the kernel.
    ``kernel_type``: ``"aiv_only"``, ``"aic_only"``, ``"mix_aic_1_2"`` or ``"coupled"`` (Ascend C's
    KERNEL_TYPE_*), which cores of a split chip the blocks run on; None infers it (:mod:`npusim.cores`).
    ``progress``: a line that says how far the launch has got (simulated time, blocks done), in a notebook
    or on stderr: True from the start, None (default) once it has run for 2 s, False never.
    ``progress_title``: what that line names (default: the kernel function's name), e.g. the call the
    learner wrote, ``ops.call("matmul", ...)``, rather than the operator's internal kernel.
    The kernel runs with numpy's floating-point warnings off: inf and NaN are the hardware's answer.
    """
    if not isinstance(auto_sync, bool):
        raise UsageError(f"auto_sync must be True or False, not {auto_sync!r}",
                         hint="launch(..., auto_sync=False) builds the kernel without the compiler's automatic "
                              "scalar flags")
    # a launch allocates many small records (timeline, tracker) and no cyclic garbage: the cyclic collector,
    # whose passes scan every young object, stays off until the launch's own state (cores, trackers,
    # tensors) is gone with _run_launch's frame, so that it then scans only what the result keeps
    collect = gc.isenabled()
    gc.disable()
    try:
        return _run_launch(kernel_fn, block_dim, args, kwargs, config, sanitize, l2, algorithmic_macs, auto_sync,
                           kernel_type, progress, progress_title)
    finally:
        if collect:
            gc.enable()


def _run_launch(kernel_fn: Callable, block_dim: int, args: tuple, kwargs: dict, config, sanitize: str,
                l2: L2Cache | None, algorithmic_macs: int | None, auto_sync: bool, kernel_type: str | None,
                progress: bool | None, progress_title: str | None = None) -> LaunchResult:
    cfg = get_config(config)
    if not isinstance(block_dim, (int, np.integer)) or block_dim < 1 or block_dim > 65535:
        raise UsageError(f"block_dim must be an int in 1..65535, got {block_dim!r}",
                         hint="launch(kernel, block_dim, *args): block_dim is the number of blocks, before the "
                              "kernel's arguments")
    block_dim = int(block_dim)
    if algorithmic_macs is not None and (not isinstance(algorithmic_macs, (int, np.integer)) or algorithmic_macs < 0):
        raise UsageError(f"algorithmic_macs must be a non-negative int, got {algorithmic_macs!r}",
                         hint="give the operation's useful multiply-accumulates, e.g. M * N * K of a matmul")
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

    kname = getattr(kernel_fn, "__name__", "kernel")
    shared = l2 if l2 is not None else current_shared()
    tried: list[MemorySystem] = []

    def execute(plan: Plan) -> tuple[dict, MemorySystem, LaunchProgress]:
        active, n_units = plan.active, plan.n_units
        memsys = MemorySystem(cfg, active, shared)
        tried.append(memsys)
        for buf in gm.values():
            memsys.register(buf)
        chip = ChipSync(plan, [buf.tracker for buf in gm.values()])
        shown = LaunchProgress(f"{progress_title or kname} on {active} core(s)", n_units, cfg.cycles_to_us, progress)

        def run_block(b: int, t0: float) -> tuple[Core, float]:
            core = Core(cfg, b, block_dim, active, sanitize, t0=t0)
            core.memsys = memsys
            core.auto_sync = auto_sync
            core.kind, core.kernel_block_idx, core.sub_block = plan.unit(b)
            core.plan, core.chip = plan, chip
            run_on(core)
            with np.errstate(all="ignore"):   # once per kernel (and in its own thread), not per instruction
                try:
                    kernel_fn(*new_args, **new_kwargs)
                except TypeError as e:   # an instruction called with arguments it does not take: its terms
                    usage = from_type_error(e)
                    if usage is None:
                        raise
                    raise usage from None
            return core, core.finish()

        prev = run_on(None)
        try:
            if active > 1:   # cores run at the same time: interleave their GM accesses in time order
                sched = Interleaver()
                memsys.sync = sched.sync
                chip.sched = sched
                cores = sched.run(n_units, active, run_block, chip.deadlock, shown)
            else:            # one core: its blocks run one after another anyway
                memsys.sync = lambda core, t: shown.tick(t)
                cores, t = {}, 0.0
                for b in range(n_units):
                    cores[b], t = run_block(b, t)
                    shown.block_done(t)
        finally:
            run_on(prev)
        return cores, memsys, shown

    plan = plan_launch(cfg, kernel_fn, block_dim, kernel_type, list(bound.arguments.values()))
    try:
        cores, memsys, shown = execute(plan)
    except KernelTypeError:
        # an inferred type missed a memory the kernel uses (a position reached in a way the scan does not
        # see): if nothing has touched GM yet, the launch starts again on coupled cores, which have it all
        m = tried[-1]
        if not plan.inferred or any(b.tracker is not None and b.tracker.seq for b in gm.values()) \
                or m.l2_hit_bytes or m.l2_miss_bytes or m.hbm_write_bytes:
            raise
        plan = coupled_plan(cfg, block_dim)
        cores, memsys, shown = execute(plan)
    active, n_units = plan.active, plan.n_units
    busy = {p.msprof_name: 0.0 for p in PIPES}
    path_bytes: dict[str, int] = {}
    records: list[tuple] = []
    occupancy: list[tuple] = []
    reserved: dict[str, int] = {}
    block_start, block_end, block_reserved = [], [], []
    macs = issued = 0
    cube_ideal = vec_ideal = 0.0
    vec_ops = 0
    cube_dtype = None
    for b in range(n_units):
        core = cores[b]
        block_start.append(core.t0)
        block_end.append(max(max(core.pipe_free), core.scalar_t))
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
        issued += core.issued_macs
        cube_ideal += core.cube_ideal_cycles
        vec_ops += core.vector_ops
        vec_ideal += core.vector_ideal_cycles
        cube_dtype = cube_dtype or core.cube_peak_dtype
        core.release()
    if algorithmic_macs is not None and cube_dtype is not None:   # the useful work's ideal Cube time
        cube_ideal = int(algorithmic_macs) / cfg.cube_macs_per_cycle[cube_dtype]
    profile = Profile(
        kernel=kname, config=cfg, block_dim=block_dim,
        total_cycles=max(max(block_end), memsys.drained), block_start_cycles=block_start,
        block_end_cycles=block_end, pipe_busy_cycles=busy,
        path_bytes=path_bytes, cube_macs=macs, cube_ideal_cycles=cube_ideal, cube_dtype=cube_dtype,
        vector_ops=vec_ops, vector_ideal_cycles=vec_ideal, block_records=records,
        block_occupancy=occupancy, reserved_bytes=reserved, block_reserved_bytes=block_reserved,
        issued_macs=issued, algorithmic_macs=macs if algorithmic_macs is None else int(algorithmic_macs),
        l2_hit_bytes=memsys.l2_hit_bytes, l2_miss_bytes=memsys.l2_miss_bytes,
        hbm_read_bytes=memsys.hbm_read_bytes, hbm_write_bytes=memsys.hbm_write_bytes,
        hbm_drain_cycles=memsys.drained, kernel_type=plan.kernel_type, cores=active)
    shown.close(profile.total_cycles)
    return LaunchResult({k: v.array for k, v in gm.items()}, profile)
