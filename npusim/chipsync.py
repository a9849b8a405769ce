"""Synchronisation between the cores of a launch, and atomic accumulation into GM.

- :func:`sync_all` (SyncAll): every participating core drains its pipes and waits until all have arrived;
  all GM accesses before it are then ordered before all accesses after it (the race checker agrees).
- :func:`cross_core_set_flag` / :func:`cross_core_wait_flag` (CrossCoreSetFlag / CrossCoreWaitFlag):
  counting semaphores between cores [S2]. Mode 0 orders all cores of one kind (a wait returns once every
  AIV, or every AIC, has set the flag), mode 1 the two AIVs of one AI core, mode 2 an AIC and its AIVs (an
  AIC's set releases each AIV's wait; an AIC's wait needs both AIVs' sets). Flag ids 0-10; a counter holds
  at most 15 sets [S2]. The waiter is ordered after everything the setters did before their set.
- :func:`set_atomic_add` / ``_max`` / ``_min`` / :func:`set_atomic_none` (SetAtomicAdd, ...): later GM
  writes of this core (data_copy, data_copy_pad UB->GM, fixpipe) combine with what GM holds instead of
  overwriting it; atomic writes of different cores to the same bytes do not race, other accesses do.

A wait that can never be satisfied (a flag nobody sets, a SyncAll some core never reaches, a SyncAll with
more blocks than cores, whose later wave cannot start) hangs the hardware; here it is a SyncError.
Costs: :func:`npusim.costs.cross_core_flag_cycles` and :func:`npusim.costs.sync_all_cycles`.

Also here: what a kernel asks about the core it runs on (:func:`ascend_is_aiv`, :func:`get_sub_block_idx`,
:func:`get_core_num_aiv`, ...; the split itself is :mod:`npusim.cores`).
"""

from __future__ import annotations

import numpy as np

from . import costs
from .config import get_config
from .core import current
from .cores import MIX
from .dtypes import NAMES, as_dtype
from .errors import DtypeError, SyncError, UsageError, report
from .pipes import N_PIPES, Pipe
from .sanitizer import call_site, format_site

MAX_FLAG_ID = 10
MAX_PENDING_SETS = 15
_ATOMIC_OPS = {"add": np.add, "max": np.maximum, "min": np.minimum}


class ChipSync:
    """The cross-core state of one launch: SyncAll arrivals, flag counters, GM trackers to order."""

    def __init__(self, plan, gm_trackers: list) -> None:
        self.plan = plan
        self.sched = None            # the launch's Interleaver (None: units run one after another)
        self.trackers = [t for t in gm_trackers if t is not None]
        if plan.kernel_type == MIX:   # three units per block: messages name them as msSanitizer does
            for tr in self.trackers:
                tr.label = plan.label
        self.cores: dict[int, object] = {}   # unit -> Core, while it runs
        self.arrived: dict[bool, list] = {True: [], False: []}   # aiv_only -> [(unit, time)] of this round
        self.pending: dict[tuple[int, int], list] = {}   # (unit, flag) -> [(mode, time, setter, seqs)]
        self.waiting: dict[int, str] = {}    # unit -> what it waits for (for the hang message)
        self.chain_started = False           # init_determine_compute_workspace has run

    # --- who takes part -------------------------------------------------------------------------
    def _kind(self, u: int):
        return self.plan.unit(u)[0]

    def _same_kind(self, u: int) -> list[int]:
        k = self._kind(u)
        return [v for v in range(self.plan.n_units) if self._kind(v) == k]

    def _block_units(self, u: int) -> list[int]:
        b = u // 3
        return [3 * b, 3 * b + 1, 3 * b + 2]

    def _hang(self, core, what: str, why: str, hint: str, site) -> None:
        raise SyncError(f"{what} in {self.plan.label(core.block_idx)} {why}: on hardware the kernel hangs",
                        hint=hint, where=format_site(site))

    def _block(self, core, what: str, site) -> None:
        """Wait (in simulated time) until another core wakes this one; a hang if none can."""
        if self.sched is None:
            self._hang(core, what, "waits for a core that has already ended or never runs",
                       "every wait needs a matching set on another core that runs at the same time", site)
        self.waiting[core.block_idx] = f"{what} at {format_site(site)}"
        self.sched.block(core)
        self.waiting.pop(core.block_idx, None)

    def deadlock(self, blocked: list[int]) -> SyncError:
        """The error of a launch whose remaining cores all wait (called by the Interleaver)."""
        who = "; ".join(f"{self.plan.label(u)}: {self.waiting.get(u, '?')}" for u in sorted(blocked))
        return SyncError(f"every remaining core waits and none can go on ({who}): on hardware the kernel hangs",
                         hint="a core ended (or waits elsewhere) without the set_flag or sync_all the others wait "
                              "for: every core must reach each sync_all, and every cross_core_wait_flag needs its "
                              "cross_core_set_flag(s)")

    def _order_after(self, waiter: int, setter: int, seqs: dict | None) -> None:
        for tr in self.trackers:
            order = tr.order if tr.order is not None else {}
            tr.order = order
            if seqs is None:
                order["barrier"] = tr.seq
            else:
                k = (waiter, setter)
                order[k] = max(order.get(k, 0), seqs.get(id(tr), 0))

    # --- SyncAll ----------------------------------------------------------------------------------
    def sync_all(self, core, aiv_only: bool, site) -> None:
        plan = self.plan
        parts = [u for u in range(plan.n_units) if not aiv_only or self._kind(u) != "aic"] \
            if plan.kernel_type == MIX else list(range(plan.n_units))
        if core.block_idx not in parts:
            raise UsageError("sync_all() on a Cube core of a mix kernel takes part only with aiv_only=False",
                             hint="call sync_all(aiv_only=False) on every core, or only on the AIVs")
        if plan.n_units > plan.active:
            self._hang(core, "sync_all()", f"waits for all {plan.block_dim} blocks, but only "
                       f"{plan.active // plan.units_per_block} run at once: the later wave starts only when the "
                       f"first has ended", "launch at most as many blocks as the chip has cores of this kind "
                       f"(ns.get_core_num_aiv() for a vector kernel) when the kernel calls sync_all()", site)
        t = max(max(core.pipe_free), max(core.pipe_ready), core.scalar_t)   # drains every pipe, as PIPE_ALL
        core.scalar_issue()
        arrived = self.arrived[aiv_only]
        arrived.append((core.block_idx, max(t, core.scalar_t)))
        if len(arrived) < len(parts):
            self._block(core, "sync_all()", site)
        else:
            release = max(a for _, a in arrived) + costs.sync_all_cycles(core.cfg)
            self.release_time = release
            self.arrived[aiv_only] = []
            self._order_after(-1, -1, None)
            for u, _ in arrived:
                if u != core.block_idx:
                    self.sched.wake(u, release)
        t = self.release_time
        merged = [max(col) for col in zip(*core.vc)]
        for p in range(N_PIPES):
            core.wait_until(p, t, merged)
        core.records.append((0, core.scalar_t, t, "sync_all", 0, site))
        core.scalar_t = t

    # --- CrossCoreSetFlag / CrossCoreWaitFlag -----------------------------------------------------------
    def targets(self, core, mode: int, site) -> list[int]:
        u, plan = core.block_idx, self.plan
        if mode == 0:
            return self._same_kind(u)
        if mode == "chain":   # notify_next_block: the next unit of this kind, the first after the last
            same = self._same_kind(u)
            return [same[(same.index(u) + 1) % len(same)]]
        if plan.kernel_type != MIX:
            raise UsageError(f"cross_core_set_flag mode {mode} orders the cores inside one AI core: it needs a "
                             f"mix_aic_1_2 kernel, this one runs as {plan.kernel_type}",
                             hint="mode 0 orders all cores of one kind; modes 1 and 2 need kernel_type='mix_aic_1_2'")
        group = self._block_units(u)
        if mode == 1:
            if core.kind != "aiv":
                raise UsageError("cross_core_set_flag mode 1 orders the two AIVs of an AI core; it runs on an AIC",
                                 hint="call it under ns.ascend_is_aiv(), or use mode 2 between the AIC and its AIVs")
            return group[1:]
        if mode == 2:
            return group[1:] if core.kind == "aic" else group[:1]
        raise UsageError(f"cross_core_set_flag: mode must be 0, 1 or 2, not {mode!r}",
                         hint="0: all cores of one kind; 1: the AIVs of one AI core; 2: an AIC and its AIVs")

    def set_flag(self, core, mode: int, pipe: Pipe, flag: int, site) -> None:
        core.scalar_issue()
        t = core.fire_time(int(pipe)) + costs.cross_core_flag_cycles(core.cfg)
        seqs = {id(tr): tr.seq for tr in self.trackers}
        for v in self.targets(core, mode, site):
            q = self.pending.setdefault((v, flag), [])
            q.append((mode, t, core.block_idx, seqs))
            if len(q) > MAX_PENDING_SETS:
                report(SyncError(f"cross_core_set_flag({flag}) in {self.plan.label(core.block_idx)}: the counter of "
                                 f"flag {flag} on {self.plan.label(v)} holds {len(q)} sets nobody has waited for; "
                                 f"it counts at most {MAX_PENDING_SETS}", where=format_site(site),
                                 hint="wait for the flag on the other core before setting it again"), core.mode)
            if v in self.waiting and v != core.block_idx:
                self.sched.wake(v, t)
        core.records.append((int(pipe), t, t, "notify_next_block" if mode == "chain" else
                             f"cross_core_set_flag({flag})", 0, site))

    def _need(self, u: int, mode) -> int:
        if mode == "chain":
            return 1
        if mode == 0:
            return len(self._same_kind(u))
        if mode == 1:
            return 2
        return 1 if self._kind(u) == "aiv" else 2

    def wait_flag(self, core, flag: int, pipe: Pipe, site) -> None:
        core.scalar_issue()
        u = core.block_idx
        key = (u, flag)
        while True:
            q = self.pending.get(key, [])
            if q and len(q) >= self._need(u, q[0][0]):
                break
            self._block(core, "wait_pre_block" if flag == "chain" else f"cross_core_wait_flag({flag})", site)
        took = q[:self._need(u, q[0][0])]
        del q[:len(took)]
        t = max(s[1] for s in took)
        for _, _, setter, seqs in took:
            self._order_after(u, setter, seqs)
        core.wait_until(int(pipe), t, None)
        core.records.append((int(pipe), t, t, "wait_pre_block" if flag == "chain" else
                             f"cross_core_wait_flag({flag})", 0, site))


# --- the kernel's API ----------------------------------------------------------------------------
def _chip(core):
    return core.chip


def sync_all(gm_workspace=None, ub_workspace=None, aiv_only: bool = True) -> None:
    """SyncAll: wait until every core of the launch has reached this point (all pipes drained).

    ``sync_all()`` is the hardware form; ``sync_all(gm_workspace, ub_workspace)`` the software form, whose
    int32 workspaces (GM: ``8 * block_num`` elements the host zeroed; UB: as many) npusim checks but does
    not use: it times both forms alike. In a ``mix_aic_1_2`` kernel ``aiv_only=True`` (Ascend C's default
    ``SyncAll<true>``) syncs the AIVs only."""
    core = current()
    site = call_site()
    if gm_workspace is not None or ub_workspace is not None:
        _check_workspaces(core, gm_workspace, ub_workspace, "sync_all", 8 * core.block_num)
    _chip(core).sync_all(core, bool(aiv_only), site)


def _check_workspaces(core, gm, ub, what: str, need: int) -> None:
    from .tensor import GlobalTensor, LocalTensor

    if not isinstance(gm, GlobalTensor) or not isinstance(ub, LocalTensor):
        raise UsageError(f"{what}(gm_workspace, ub_workspace) takes a GlobalTensor and a LocalTensor, not "
                         f"{type(gm).__name__} and {type(ub).__name__}",
                         hint=f"pass both workspaces (int32, GM then UB), or neither: {what}()")
    if len(gm) < need:
        raise UsageError(f"{what}: the GM workspace '{gm.name}' has {len(gm)} elements; {core.block_num} blocks "
                         f"need {need}", hint=f"allocate at least {need} int32 elements of GM workspace")


def init_determine_compute_workspace(gm_workspace, ub_workspace) -> None:
    """InitDetermineComputeWorkspace: start the block-by-block order of :func:`wait_pre_block` /
    :func:`notify_next_block` (block 0 goes first)."""
    core = current()
    _check_workspaces(core, gm_workspace, ub_workspace, "init_determine_compute_workspace", 1)
    core.scalar_issue()
    chip = _chip(core)
    if core.block_idx == 0 and not chip.chain_started:
        chip.chain_started = True
        chip.pending.setdefault((0, "chain"), []).append(("chain", core.scalar_t, 0, {}))


def wait_pre_block(gm_workspace, ub_workspace) -> None:
    """WaitPreBlock: wait until the block before this one (block ``block_num - 1`` for block 0, from its
    second round on) has called :func:`notify_next_block`: atomic adds then run in block order."""
    core = current()
    _check_workspaces(core, gm_workspace, ub_workspace, "wait_pre_block", 1)
    _chip(core).wait_flag(core, "chain", Pipe.S, call_site())


def notify_next_block(gm_workspace, ub_workspace) -> None:
    """NotifyNextBlock: let the next block (block 0 after the last) go on from its wait_pre_block."""
    core = current()
    _check_workspaces(core, gm_workspace, ub_workspace, "notify_next_block", 1)
    _chip(core).set_flag(core, "chain", Pipe.MTE3, "chain", call_site())


def _check_flag(flag, what: str) -> int:
    if isinstance(flag, (bool, np.bool_)) or not isinstance(flag, (int, np.integer)) or not 0 <= flag <= MAX_FLAG_ID:
        raise UsageError(f"{what}: flag id must be an int from 0 to {MAX_FLAG_ID}, not {flag!r}",
                         hint=f"cross-core flag ids are 0..{MAX_FLAG_ID} on A2 [S2]")
    return int(flag)


def cross_core_set_flag(mode: int, pipe: Pipe, flag_id: int) -> None:
    """CrossCoreSetFlag<modeId, pipe>(flagId): signal the other core(s) once ``pipe``'s earlier work is done."""
    if not isinstance(pipe, Pipe) or pipe == Pipe.ALL:
        raise UsageError(f"cross_core_set_flag: pipe must be a Pipe (e.g. Pipe.MTE3), not {pipe!r}",
                         hint="cross_core_set_flag(mode, Pipe.MTE3, flag_id): the pipe whose work the flag follows")
    core = current()
    _chip(core).set_flag(core, mode, pipe, _check_flag(flag_id, "cross_core_set_flag"), call_site())


def cross_core_wait_flag(flag_id: int, pipe: Pipe = Pipe.S) -> None:
    """CrossCoreWaitFlag(flagId): ``pipe`` (the scalar unit by default) waits for the flag's set(s)."""
    if not isinstance(pipe, Pipe) or pipe == Pipe.ALL:
        raise UsageError(f"cross_core_wait_flag: pipe must be a Pipe, not {pipe!r}",
                         hint="cross_core_wait_flag(flag_id) waits on the scalar unit (Pipe.S)")
    core = current()
    _chip(core).wait_flag(core, _check_flag(flag_id, "cross_core_wait_flag"), pipe, call_site())


def _set_atomic(kind: str | None, dtype) -> None:
    core = current()
    core.scalar_issue()
    core.atomic = None if kind is None else (kind, NAMES[as_dtype(dtype, f"set_atomic_{kind}")])


def set_atomic_add(dtype) -> None:
    """SetAtomicAdd<T>(): later GM writes of this core add to GM (T: float16, bfloat16, float32, int8,
    int16, int32) instead of overwriting it."""
    _set_atomic("add", dtype)


def set_atomic_max(dtype) -> None:
    """SetAtomicMax<T>(): later GM writes keep the element-wise maximum of GM and the data."""
    _set_atomic("max", dtype)


def set_atomic_min(dtype) -> None:
    """SetAtomicMin<T>(): later GM writes keep the element-wise minimum."""
    _set_atomic("min", dtype)


def set_atomic_none() -> None:
    """SetAtomicNone(): GM writes overwrite again."""
    _set_atomic(None, None)


def atomic_op(core, op: str) -> str:
    """The op name a GM write is recorded under: ``data_copy (atomic add)`` while an atomic mode is on."""
    return op if core.atomic is None else f"{op} (atomic {core.atomic[0]})"


def store(core, dst: np.ndarray, src: np.ndarray, gm_dtype, site=None) -> None:
    """Write ``src`` into the GM view ``dst`` (same shape, bytes or elements), combining under an atomic mode."""
    if core.atomic is None:
        np.copyto(dst, src)
        return
    kind, name = core.atomic
    if NAMES[gm_dtype] != name:
        raise DtypeError(f"set_atomic_{kind}({name}) is on, but this GM write is {NAMES[gm_dtype]}: the atomic "
                         f"unit would combine the bytes as {name}",
                         hint=f"call set_atomic_{kind}(ns.{NAMES[gm_dtype]}) for this output, or set_atomic_none() "
                              f"before a plain write", where=format_site(site or call_site()))
    dt = np.dtype(gm_dtype)
    if dst.dtype != dt:
        dst, src = dst.view(dt), src.view(dt)
    _ATOMIC_OPS[kind](dst, src, out=dst)


# --- what a kernel asks about its core -----------------------------------------------------------
def ascend_is_aiv() -> bool:
    """ASCEND_IS_AIV: this copy of the kernel runs on a Vector core (True on a coupled core too)."""
    return current().kind != "aic"


def ascend_is_aic() -> bool:
    """ASCEND_IS_AIC: this copy of the kernel runs on a Cube core (True on a coupled core too)."""
    return current().kind != "aiv"


def get_sub_block_idx() -> int:
    """GetSubBlockIdx: which AIV of its AI core runs this copy (0 or 1; 0 on an AIC or coupled core)."""
    return current().sub_block


def get_sub_block_num() -> int:
    """GetSubBlockNum: AIVs per AI core in a MIX kernel (``aiv_per_core``), else 1."""
    core = current()
    return core.cfg.aiv_per_core if core.plan is not None and core.plan.kernel_type == MIX else 1


def _cfg(config):
    from . import core

    return core._current.cfg if core._current is not None and config is None else get_config(config)


def get_core_num_aiv(config=None) -> int:
    """GetCoreNumAiv: the chip's Vector cores (48 on a2; ``num_cores`` on a coupled chip); in a kernel those
    of the launch's config, outside one those of ``config`` (default a2), as the host's platform query."""
    return _cfg(config).vector_cores


def get_core_num_aic(config=None) -> int:
    """GetCoreNumAic: the chip's Cube cores (``num_cores``), like :func:`get_core_num_aiv`."""
    return _cfg(config).num_cores
