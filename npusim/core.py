"""One simulated AI core while a kernel runs on it: pipe clocks, synchronisation, memories, timeline.

Timing follows from the program. The scalar unit issues every instruction in program order, spending
``scalar_issue_cycles`` on each; the instruction then waits in its pipe's queue and starts at
``max(issue time, end of the pipe's previous instruction, the pipe's latest wait)``. Pipes run in
parallel and only wait for one another through queues, flags and barriers, so double buffering overlaps
because its queues allow it, not because of a special case.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from . import costs, initcheck
from .config import HardwareConfig
from .cores import check_memory
from .errors import CapacityError, SyncError, UsageError, install_kernel_site, report
from .pipes import N_PIPES, ON_CHIP_MEMORIES, HardEvent, Pipe
from .sanitizer import AccessTracker, call_site, format_site

_current: "Core | None" = None

#: op name of the scalar unit's issue work on the timeline (its nbytes field counts the instructions issued)
ISSUE = "ISSUE"


def _kernel_site() -> str:
    return format_site(call_site()) if _current is not None else ""


install_kernel_site(_kernel_site)  # every NpuSimError raised while a kernel runs gets the kernel's line


def current() -> "Core":
    """The core whose kernel is running; raises outside a kernel launch."""
    core = _current
    if core is None:
        raise UsageError("no kernel is running: npusim instructions run only inside a launched kernel",
                         hint="call them in a kernel started with npusim.launch(kernel, block_dim, ...)")
    return core


def get_block_idx() -> int:
    """Index of this block in ``[0, block_dim)`` (GetBlockIdx); an AIV of a ``mix_aic_1_2`` kernel sees
    ``2 * block + sub_block``, in ``[0, 2 * block_dim)`` [S2 GetBlockIdx]."""
    return current().kernel_block_idx


def get_core_config() -> HardwareConfig:
    """The HardwareConfig of the running launch (for kernels that adapt to the preset)."""
    return current().cfg


def get_block_num() -> int:
    """Number of blocks of the launch (GetBlockNum)."""
    return current().block_num


class Memory:
    """One on-chip memory of one core: a byte array, a bump allocator, and an access tracker."""

    __slots__ = ("name", "capacity", "buf", "top", "allocations", "tracker", "core", "operands")

    def __init__(self, core: "Core", name: str, capacity: int):
        self.core = core
        self.name = name
        self.capacity = capacity
        # 0xFF bytes read back as NaN in fp16/fp32/bf16: reading memory nobody wrote shows up at once
        self.buf = np.full(capacity, 0xFF, dtype=np.uint8)
        self.top = 0
        self.allocations: list[tuple[int, int, str, object]] = []  # (addr, nbytes, label, TQue/TBuf)
        self.tracker = (AccessTracker(name, capacity, self, initcheck.InitMap(self) if initcheck.ENABLED else None)
                        if core.check else None)
        # L0A/L0B: the Mmad operands converted from this memory since an instruction last wrote it
        # (load_data and load_data_3d, the only writers of L0A and L0B, call written())
        self.operands: dict = {}

    def allocate(self, nbytes: int, align: int, label: str, owner=None) -> int:
        addr = -(-self.top // align) * align
        if addr + nbytes > self.capacity:
            used = ", ".join(f"{lbl} {n} B" for _, n, lbl, _ in self.allocations) or "nothing"
            raise CapacityError(
                f"{self.name} overflow in block {self.core.block_idx}: {label} needs {nbytes} B at "
                f"{addr:#x}, but {self.name} has {self.capacity} B ({self.capacity // 1024} KB) and "
                f"{self.top} B are already taken by: {used}",
                hint=f"make the tiles smaller or use fewer buffers so the total fits in "
                     f"{self.capacity} B of {self.name}",
                where=format_site(call_site()), memory=self.name, requested=nbytes,
                capacity=self.capacity, used=self.top)
        self.allocations.append((addr, nbytes, label, owner))
        self.top = addr + nbytes
        return addr

    def written(self) -> None:
        """An instruction wrote this memory: operands converted from it before are stale."""
        if self.operands:
            self.operands.clear()

    def describe(self, lo: int, hi: int) -> str:
        """`` (VECIN buffer 'q'[0])`` for the buffer holding byte ``lo``, for messages."""
        for addr, n, lbl, _ in self.allocations:
            if addr <= lo < addr + n:
                return f" ({lbl})"
        return ""

    def owner_at(self, lo: int):
        """The TQue or TBuf whose buffer holds byte ``lo`` (None outside every buffer)."""
        for addr, n, _, owner in self.allocations:
            if addr <= lo < addr + n:
                return owner
        return None


class Core:
    """State of one block's AI core during a launch."""

    auto_sync = False   # the compiler's automatic S <-> V/MTE2/MTE3 flags (set by launch; instructions.autosync)

    def __init__(self, cfg: HardwareConfig, block_idx: int, block_num: int, active_cores: int,
                 sanitize: str, t0: float = 0.0):
        if sanitize not in ("error", "warn", "off"):
            raise UsageError(f"sanitize must be 'error', 'warn' or 'off', not {sanitize!r}",
                             hint="launch(..., sanitize='error') stops at the first finding, 'warn' reports and "
                                  "carries on, 'off' skips the race and initialisation checks")
        self.cfg = cfg
        self.block_idx = block_idx   # the unit of the launch (AIC and AIVs of a MIX block are three units)
        self.block_num = block_num
        # the kind of core ("aiv", "aic", None: coupled), what GetBlockIdx/GetSubBlockIdx return, the
        # launch's npusim.cores.Plan, and SetAtomicAdd's dtype (None: GM writes overwrite); set by launch
        self.kind: str | None = None
        self.kernel_block_idx = block_idx
        self.sub_block = 0
        self.plan = None
        self.chip = None    # the launch's npusim.chipsync.ChipSync
        self.atomic = None
        self.memsys = None  # the launch's L2 and HBM (npusim.memsys.MemorySystem), set by launch
        self.mode = sanitize
        self.check = sanitize != "off"
        self.t0 = t0
        self.scalar_t = t0
        self.pipe_free = [t0] * N_PIPES
        self.pipe_ready = [t0] * N_PIPES
        self.busy = [0.0] * N_PIPES
        self.vc = [[0] * N_PIPES for _ in range(N_PIPES)]
        self.iq = [deque() for _ in range(N_PIPES)]
        self.depth = cfg.instr_queue_depth
        self.issue_cost = costs.scalar_issue_cycles(cfg)
        self.records: list[tuple] = []   # (pipe, start, end, op, nbytes, site)
        self.memories: dict[str, Memory] = {}
        self.flags: dict[tuple[HardEvent, int], tuple[float, list, tuple]] = {}
        self.path_bytes: dict[str, int] = {}
        self.cube_macs = 0          # multiply-accumulates the Mmads asked for (m*n*k)
        self.issued_macs = 0        # what the Cube computed: m, n, k rounded up to whole fractals
        self.cube_ideal_cycles = 0.0  # sum of macs / peak rate of their dtype
        self.cube_peak_dtype: str | None = None
        self.vector_ops = 0         # vector element operations
        self.vector_ideal_cycles = 0.0
        self.occupancy: list[tuple[float, str, int]] = []  # (time, memory, +/- bytes) of live tensors
        # the scalar unit's current run of issue work: a list in ``records`` while it may grow, made a
        # tuple like every record by finish() (``_issue_runs``: where the runs are)
        self._issue_run: list | None = None
        self._issue_runs: list[int] = []
        self.n_buffers = 0
        self.queues: list = []

    # --- memories ----------------------------------------------------------------------------------
    def memory(self, name: str) -> Memory:
        m = self.memories.get(name)
        if m is None:
            if name not in ON_CHIP_MEMORIES:
                raise UsageError(f"{name} is not an on-chip memory",
                                 hint=f"on-chip memories are {', '.join(ON_CHIP_MEMORIES)}")
            if self.kind is not None:
                check_memory(self, name)
            m = self.memories[name] = Memory(self, name, self.cfg.memory_bytes(name))
        return m

    # --- issuing instructions ----------------------------------------------------------------------
    def issue(self, pipe: int, cost, op: str, nbytes: int, site) -> float:
        """Issue one instruction on ``pipe``; returns its end time. The caller has already bumped the
        pipe's epoch and checked its accesses (see :meth:`epoch`). ``cost`` is cycles, or for a GM DMA a
        function of the start time (L2 contents and the HBM budget depend on when it runs)."""
        t = self.scalar_t
        q = self.iq[pipe]
        if len(q) >= self.depth:
            # the pipe's instruction queue is full: the scalar unit stalls until the oldest one starts
            first = q.popleft()
            if first > t:
                t = first
        self.scalar_t = t
        self.scalar_issue()
        t = self.scalar_t  # the pipe gets the instruction once the scalar unit has issued it
        start = self.pipe_free[pipe]
        r = self.pipe_ready[pipe]
        if r > start:
            start = r
        if t > start:
            start = t
        if callable(cost):
            cost = cost(start)
        end = start + cost
        self.pipe_free[pipe] = end
        self.busy[pipe] += cost
        q.append(start)
        self.records.append((pipe, start, end, op, nbytes, site))
        return end

    def scalar_issue(self) -> None:
        """The scalar unit spends ``scalar_issue_cycles`` issuing an instruction (or a queue call, flag or
        barrier). Back-to-back issue work is one ``ISSUE`` bar on the S lane of the timeline."""
        t = self.scalar_t
        self.scalar_t = end = t + self.issue_cost   # busy time: counted from the runs by finish()
        run = self._issue_run
        if run is not None and run[2] == t:
            run[2] = end
            run[4] += 1
        else:
            self._issue_run = run = [0, t, end, ISSUE, 1, ("", 0)]
            self._issue_runs.append(len(self.records))
            self.records.append(run)

    def epoch(self, pipe: int) -> list:
        """Start a new instruction on ``pipe`` for the race checker; returns the pipe's vector clock."""
        vc = self.vc[pipe]
        vc[pipe] += 1
        return vc

    def scalar_op(self, cost: float, op: str, site) -> None:
        """An instruction executed by the scalar unit itself (GetValue/SetValue)."""
        start = max(self.scalar_t, self.pipe_ready[0])
        end = start + cost
        self.scalar_t = end
        self.busy[0] += cost
        self.records.append((0, start, end, op, 0, site))

    def add_bytes(self, path: str, nbytes: int) -> None:
        self.path_bytes[path] = self.path_bytes.get(path, 0) + nbytes

    # --- synchronisation -----------------------------------------------------------------------
    def fire_time(self, pipe: int) -> float:
        """When a set_flag issued now on ``pipe`` fires: after everything issued before it on that pipe."""
        t = self.scalar_t
        if pipe:
            f, r = self.pipe_free[pipe], self.pipe_ready[pipe]
            if r > f:
                f = r
            if f > t:
                t = f
        return t

    def wait_until(self, pipe: int, t: float, vc_src) -> None:
        """Block ``pipe`` until time ``t`` and merge the happens-before clock of the signalling side."""
        if pipe == 0:
            if t > self.scalar_t:
                self.scalar_t = t
        elif t > self.pipe_ready[pipe]:
            self.pipe_ready[pipe] = t
        if vc_src is not None:
            vc = self.vc[pipe]
            for i, e in enumerate(vc_src):   # the element-wise max (3x faster than map(max, ...))
                if e > vc[i]:
                    vc[i] = e

    def set_flag(self, event: HardEvent, event_id: int) -> None:
        site = call_site()
        self._check_event(event, event_id, "set_flag", site)
        key = (event, event_id)
        if key in self.flags:
            report(SyncError(
                f"set_flag({event.name}, {event_id}) while the same flag is still set (from "
                f"{format_site(self.flags[key][2])}) in block {self.block_idx}: setting a flag twice is "
                f"undefined on hardware and can hang a later barrier",
                hint=f"every set_flag needs exactly one wait_flag({event.name}, {event_id}) before the next set",
                where=format_site(site), event=event, event_id=event_id), self.mode)
        self.scalar_issue()
        src = int(event.src)
        self.flags[key] = (self.fire_time(src), list(self.vc[src]), site)

    def wait_flag(self, event: HardEvent, event_id: int) -> None:
        site = call_site()
        self._check_event(event, event_id, "wait_flag", site)
        self.scalar_issue()
        entry = self.flags.pop((event, event_id), None)
        if entry is None:
            report(SyncError(
                f"wait_flag({event.name}, {event_id}) in block {self.block_idx} has no set_flag before it: "
                f"{event.dst.label} would wait forever on hardware (the kernel hangs)",
                hint=f"call set_flag({event.name}, {event_id}) after the {event.src.label} work this "
                     f"wait depends on, or remove the wait",
                where=format_site(site), event=event, event_id=event_id), self.mode)
            return
        self.wait_until(int(event.dst), entry[0], entry[1])

    def _check_event(self, event, event_id, what, site) -> None:
        if not isinstance(event, HardEvent):
            raise UsageError(f"{what} needs a HardEvent, not {event!r}",
                             hint=f"{what}(HardEvent.MTE2_V, 0): the event names the (source, destination) pipes")
        if not isinstance(event_id, int) or not (0 <= event_id < self.cfg.event_ids):
            report(SyncError(f"{what}({event.name}, {event_id}): event id out of range; "
                             f"'{self.cfg.name}' has event ids 0..{self.cfg.event_ids - 1} per HardEvent",
                             hint=f"use an id from 0 to {self.cfg.event_ids - 1}", where=format_site(site),
                             event=event, event_id=event_id), self.mode)

    def pipe_barrier(self, pipe: Pipe) -> None:
        """PipeBarrier: for ``Pipe.ALL``, every pipe (and the scalar unit) waits until all issued work has
        finished. For one pipe, later instructions of that pipe wait for its earlier ones; pipes here
        already complete in order, so this costs only the issue."""
        site = call_site()
        if pipe == Pipe.S:
            raise UsageError("pipe_barrier(Pipe.S) is not valid; scalar code is already in order",
                             hint="order the scalar unit against a pipe with a flag (e.g. HardEvent.V_S), or "
                                  "use pipe_barrier(Pipe.ALL)")
        self.scalar_issue()
        if pipe == Pipe.ALL:
            t = max(max(self.pipe_free), max(self.pipe_ready), self.scalar_t)
            merged = [max(col) for col in zip(*self.vc)]
            for p in range(N_PIPES):
                self.wait_until(p, t, merged)
            self.records.append((0, self.scalar_t, t, "pipe_barrier(ALL)", 0, site))
            self.scalar_t = t

    def release(self) -> None:
        """The launch has what it needs from this core: untie the core, its memories, their trackers and the
        queues' buffers, which refer to one another, so that all of it (MBs of on-chip memory, the
        trackers' records) is freed at once rather than by a pass of the cyclic collector. A tensor kept
        from the launch is then refused by every instruction (its buffer's state is ENDED)."""
        for mem in self.memories.values():
            for *_, owner in mem.allocations:
                for slot in owner.slots:
                    slot.owner = None
                    slot.state = slot.ENDED
                    slot.gen += 1   # so that the instructions' fast paths pass it to the checks
            mem.allocations.clear()
            mem.tracker = None
        for q in self.queues:
            q.core = None
        self.memories.clear()
        self.queues.clear()

    def finish(self) -> float:
        """End of the kernel on this core: check unpaired flags; returns the core's end time."""
        # sync and queue checks run in every sanitize mode ("off" only skips races)
        for (event, eid), (_, _, site) in list(self.flags.items()):
            report(SyncError(
                f"unpaired set_flag({event.name}, {eid}) from {event.src.label} to {event.dst.label} "
                f"in block {self.block_idx}: it was never waited for; on hardware the stray flag "
                f"corrupts the next kernel's synchronisation",
                hint=f"add wait_flag({event.name}, {eid}) before the kernel returns",
                where=format_site(site), event=event, event_id=eid), self.mode)
        for q in self.queues:
            q._check_at_end()
        recs = self.records
        issued = 0
        for i in self._issue_runs:
            recs[i] = tuple(recs[i])
            issued += recs[i][4]
        self.busy[0] += issued * self.issue_cost
        self._issue_run = None
        self._issue_runs.clear()
        return max(max(self.pipe_free), self.scalar_t)


def run_on(core: "Core | None"):
    """Make ``core`` the current core (used by launch)."""
    global _current
    prev = _current
    _current = core
    return prev
