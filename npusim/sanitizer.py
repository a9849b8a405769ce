"""Race detection by happens-before, and the learner's source line for every report.

Each pipe of a core keeps a vector clock: ``vc[p][q]`` is the newest instruction of pipe ``q`` known to
have finished before pipe ``p``'s next instruction. Every instruction bumps its own pipe's epoch; queues,
flags and barriers merge clocks (see :mod:`npusim.core`). An access races with an earlier one when they
overlap, at least one writes, they are on different pipes (or cores), and the earlier one's epoch is not
covered by the later pipe's clock. Whether the timing happened to separate them does not matter, as with
msSanitizer's racecheck [S12].
"""

from __future__ import annotations

import os
import sys

from . import tracebacks
from .errors import RaceError, report
from .pipes import HardEvent, Pipe

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# The simulator itself: the package's top-level modules and the instruction set. Everything else
# (reference kernels, conv2d, operators, checks, the learner's notebook) is "the kernel's code".
_SIM_DIRS = (_PKG_DIR, os.path.join(_PKG_DIR, "instructions"))
_internal_cache: dict[str, bool] = {}


def _is_internal(filename: str) -> bool:
    r = _internal_cache.get(filename)
    if r is None:
        r = os.path.dirname(os.path.abspath(filename)) in _SIM_DIRS
        _internal_cache[filename] = r
    return r


authorship_watch = None
"""While a check runs the learner's kernel: a function of each instruction's innermost kernel frame that
refuses work handed to the package's answers (set by :mod:`npusim.checks._authorship`)."""

_library_cache: dict[str, bool] = {}


def _is_library(filename: str) -> bool:
    """The package's own kernel code (reference kernels, lab helpers) or an installed library's."""
    r = _library_cache.get(filename)
    if r is None:
        r = _library_cache[filename] = tracebacks.is_package_file(filename)
    return r


def call_site() -> tuple:
    """Where the kernel issued this instruction: (file, line) of the innermost frame outside the simulator
    itself. When that frame is a package helper the learner's code called (lab 03's ``copy_strips``, lab
    04's band helpers), the learner's line instead, with the helper's name: (file, line, "copy_strips")."""
    f = sys._getframe(2)  # frame 1, the caller, is the simulator's (only the simulator calls this)
    cache = _internal_cache
    while f is not None:
        name = f.f_code.co_filename
        internal = cache.get(name)
        if internal is None:
            internal = _is_internal(name)
        if not internal:
            if authorship_watch is not None:
                authorship_watch(f)
            if _is_library(name):
                return _learner_site(f)
            return frame_site(f)
        f = f.f_back
    return ("<unknown>", 0)


def _learner_site(f) -> tuple:
    """The learner's line that called the package helper running in frame ``f``, else ``f``'s own."""
    inner, g = f, f.f_back
    while g is not None:
        name = g.f_code.co_filename
        if _is_internal(name):
            break   # the launch: a package kernel of its own, not called by the learner
        if not _is_library(name):
            return frame_site(g) + (inner.f_code.co_name,)
        inner, g = g, g.f_back
    return frame_site(f)


_sites: dict[tuple, tuple] = {}   # (id(code), offset) -> (code, site): holding the code keeps its id its own


def frame_site(f) -> tuple[str, int]:
    """(file, line) where frame ``f`` is now. Memoised per code object and instruction offset: ``f_lineno``
    walks the code's line table from its start, microseconds per call in a long kernel function."""
    code, at = f.f_code, f.f_lasti
    if at < 128:   # near the start of its code the walk costs no more than the lookup
        return (code.co_filename, f.f_lineno)
    hit = _sites.get((id(code), at))
    if hit is not None:
        return hit[1]
    if len(_sites) > 1 << 16:   # code objects of re-run notebook cells: do not keep them all
        _sites.clear()
    site = (code.co_filename, f.f_lineno)
    _sites[(id(code), at)] = (code, site)
    return site


def format_site(site: tuple) -> str:
    """``file.py:12``, or ``In [7], line 12`` for a notebook cell (as JupyterLab labels the cell); with
    ``, in copy_strips`` when the learner's line called a package helper that issued the instruction."""
    text = tracebacks.site(site[0], site[1])
    return f"{text}, in {site[2]}" if len(site) > 2 else text


def guess_name(obj, frame=None) -> str | None:
    """The variable or ``self`` attribute name the kernel gave ``obj``, searched from ``frame`` (default:
    the innermost frame outside the simulator) outwards to the launch. Only for messages: it walks frames."""
    if frame is None:
        frame = sys._getframe(1)
        while frame is not None and _is_internal(frame.f_code.co_filename):
            frame = frame.f_back
    while frame is not None:
        for k, v in frame.f_locals.items():
            if v is obj:
                return k
            if k == "self" and hasattr(v, "__dict__"):
                for a, w in vars(v).items():
                    if w is obj:
                        return a
        frame = frame.f_back
        if frame is not None and frame.f_code.co_name in ("launch", "_run_launch"):
            break
    return None


def describe_tensor(t) -> str:
    """A tensor as the learner knows it: their variable (when found), the buffer or GM argument, the
    position and dtype, e.g. ``x_local (buffer 'in_x'[0] at VECIN, float16)``, else
    ``buffer 'in_x'[0] (at VECIN, float16)``."""
    var = guess_name(t)
    what, where = _tensor_parts(t)
    return f"{var} ({tensor_body(t)})" if var else f"{what} ({where})"


def tensor_body(t) -> str:
    """``buffer 'in_x'[0] at VECIN, float16`` (a part of it: ``[first:last]`` after the label), or
    ``GM 'x', float32``."""
    what, where = _tensor_parts(t)
    return f"{what}{', ' if getattr(t, 'slot', None) is None else ' '}{where}"


def _tensor_parts(t) -> tuple[str, str]:
    slot = getattr(t, "slot", None)
    if slot is None:  # a GlobalTensor
        what = f"GM '{t.name}'"
        if t.offset or t.size != t.buf.flat.size:
            what += f"[{t.offset}:{t.offset + t.size}]"
        return what, t.dtype.name
    what = f"buffer {t.name}"
    first = (t.addr - slot.addr) // t.dtype.itemsize
    if first or t.nbytes != slot.nbytes:
        what += f"[{first}:{first + t.size}]"
    return what, f"at {t.position.name}, {t.dtype.name}"


# record fields (a tuple is the cheapest record in CPython). A record covers blocks of ``blen`` bytes
# every ``pitch`` bytes from ``lo`` (``nblk`` of them); a contiguous access has pitch 0. ``seq`` orders the
# accesses of one tracker in program order.
_LO, _HI, _W, _CORE, _PIPE, _EPOCH, _SITE, _OP, _PITCH, _BLEN, _NBLK, _SEQ = range(12)


def _hits_blocks(a: int, p: int, bl: int, n: int, x: int, y: int) -> bool:
    """Does [x, y) meet one of the blocks [a + i*p, a + i*p + bl), 0 <= i < n?"""
    i_lo = max(0, (x - a - bl) // p + 1)
    i_hi = min(n - 1, (y - 1 - a) // p)
    return i_lo <= i_hi


def _overlap(r, lo: int, hi: int, pitch: int, blen: int, n: int) -> bool:
    """Exact overlap test between record ``r`` and an access (both possibly strided)."""
    if r[_LO] >= hi or lo >= r[_HI]:
        return False
    rp = r[_PITCH]
    if not rp:
        return True if not pitch else _hits_blocks(lo, pitch, blen, n, r[_LO], r[_HI])
    if not pitch:
        return _hits_blocks(r[_LO], rp, r[_BLEN], r[_NBLK], lo, hi)
    if rp == pitch:
        # blocks i of r and j of the access meet iff (lo - r.lo - r.blen) < (i - j) * p < (lo - r.lo + blen)
        d = lo - r[_LO]
        k_min = (d - r[_BLEN]) // pitch + 1
        k_max = -((-(d + blen)) // pitch) - 1
        return max(k_min, -(n - 1)) <= min(k_max, r[_NBLK] - 1)
    if n <= r[_NBLK]:
        return any(_hits_blocks(r[_LO], rp, r[_BLEN], r[_NBLK], lo + j * pitch, lo + j * pitch + blen)
                   for j in range(n))
    return any(_hits_blocks(lo, pitch, blen, n, r[_LO] + i * rp, r[_LO] + i * rp + r[_BLEN])
               for i in range(r[_NBLK]))


class AccessTracker:
    """Recent accesses to one memory (a core's UB/L1/L0x, or one GM buffer), bucketed by address."""

    __slots__ = ("name", "shift", "reads", "writes", "memory", "init", "seq", "order", "label")

    def __init__(self, name: str, nbytes: int, memory=None, init=None):
        self.name = name
        # 4-64 KB buckets (about 64 per memory): a typical access touches one or two buckets, and
        # pruning keeps few live records in each
        self.shift = min(16, max(12, (max(nbytes, 1) >> 6).bit_length()))
        self.reads: dict[int, list] = {}   # bucket -> read records
        self.writes: dict[int, list] = {}  # bucket -> write records
        self.memory = memory  # the on-chip npusim.core.Memory (buffer names and owners), None for GM
        self.init = init  # npusim.initcheck.InitMap of the memory, or None
        self.seq = 0
        # GM: what cross-core syncs order (npusim.chipsync): {"barrier": seq} orders every earlier record,
        # {(core, other): seq} the other core's records up to seq before this core's later accesses
        self.order: dict | None = None
        self.label = None   # GM of a mix launch: unit -> "aic(0)" / "aiv(1)" for messages (npusim.chipsync)

    def access(self, lo: int, hi: int, write: bool, core: int, pipe: int, vc, epoch: int,
               site, op: str, mode: str, pitch: int = 0, blen: int = 0, nblk: int = 1,
               key: int | None = None, grain: int = 0) -> None:
        """Check an access of bytes [lo, hi) (or ``nblk`` blocks of ``blen`` bytes every ``pitch``)
        against earlier ones, then remember it. ``key``: the on-chip buffer the access lies in; all its
        accesses share one bucket (buffers never overlap). ``grain``: a read whose every ``grain`` bytes
        (e.g. 512 B fractals) need only one written byte each (see :mod:`npusim.initcheck`)."""
        if hi <= lo:
            return
        if pitch and (nblk <= 1 or blen >= pitch):
            pitch = 0
        init = self.init
        if init is not None:
            k = (lo << 32) | hi if not (pitch or grain) else (lo, hi, pitch, blen, grain)
            if k not in init.done:
                init.update(k, lo, hi, write, pitch, blen, nblk, core, pipe, site, op, mode, grain)
        if key is None:
            shift = self.shift
            first, last = lo >> shift, (hi - 1) >> shift
            keys = (first,) if first == last else range(first, last + 1)
        else:
            keys = (key,)
        found = None  # id -> conflicting record
        reads, writes = self.reads, self.writes
        strided = pitch != 0
        covers = write and not strided  # a write that covers an older access supersedes it (it is ordered
        # after it, or reported). A read can only race with writes; a write with both. Reads are kept apart
        # so that the many reads of an input never slow down the next read.
        for table in ((reads, writes) if write else (writes,)):
            for b in keys:
                lst = table.get(b)
                if not lst:
                    continue
                keep = None
                i = 0
                for rec in lst:
                    if (rec[_LO] < hi and lo < rec[_HI]
                            and (rec[_CORE] != core or (rec[_PIPE] != pipe and vc[rec[_PIPE]] < rec[_EPOCH]))
                            and (not (strided or rec[_PITCH]) or _overlap(rec, lo, hi, pitch, blen, nblk))):
                        if found is None:
                            found = {}
                        found[id(rec)] = rec
                    if covers and rec[_LO] >= lo and rec[_HI] <= hi:
                        if keep is None:
                            keep = lst[:i]
                    elif keep is not None:
                        keep.append(rec)
                    i += 1
                if keep is not None:
                    table[b] = keep
        if found:
            # the latest conflicting access first: what orders this one after it is the fix to suggest
            for r in sorted(found.values(), key=lambda r: r[_SEQ], reverse=True):
                if r[_CORE] != core and self._ordered(r, core, write, op):
                    continue
                self._race(r, lo, hi, write, core, pipe, site, op, mode)
        self.seq = seq = self.seq + 1
        rec = (lo, hi, write, core, pipe, epoch, site, op, pitch, blen, nblk, seq)
        table = writes if write else reads
        for b in keys:
            lst = table.get(b)
            if lst is None:
                table[b] = [rec]
                continue
            if not (write or strided):  # a contiguous read supersedes older reads of its own pipe that it covers
                keep = None
                i = 0
                for r in lst:
                    if r[_LO] >= lo and r[_HI] <= hi and r[_PIPE] == pipe and r[_CORE] == core and not r[_PITCH]:
                        if keep is None:
                            keep = lst[:i]
                    elif keep is not None:
                        keep.append(r)
                    i += 1
                if keep is not None:
                    table[b] = lst = keep
            lst.append(rec)

    def unordered_pipes(self, lo: int, hi: int, write: bool, core: int, pipe: int, vc,
                        key: int | None = None) -> set[int]:
        """The pipes of this core whose earlier accesses of bytes [lo, hi) an access by ``pipe`` would race
        with (what :meth:`access` would report, without reporting or recording it). Auto-sync asks this to
        insert the flags the compiler inserts."""
        if key is None:
            keys = range(lo >> self.shift, ((hi - 1) >> self.shift) + 1)
        else:
            keys = (key,)
        out: set[int] = set()
        for table in ((self.reads, self.writes) if write else (self.writes,)):
            for b in keys:
                for rec in table.get(b, ()):
                    if (rec[_LO] < hi and lo < rec[_HI] and rec[_CORE] == core and rec[_PIPE] != pipe
                            and vc[rec[_PIPE]] < rec[_EPOCH]
                            and (not rec[_PITCH] or _overlap(rec, lo, hi, 0, 0, 1))):
                        out.add(rec[_PIPE])
        return out
    def _who(self, core: int) -> str:
        return self.label(core) if self.label is not None else f"block {core}"

    def _ordered(self, rec, core: int, write: bool, op: str) -> bool:
        """Whether another core's record is ordered before this access: both atomic writes, or a SyncAll
        or a cross-core flag between them (see ``order``)."""
        if write and rec[_W] and "(atomic" in op and "(atomic" in rec[_OP]:
            return True
        order = self.order
        if order is None:
            return False
        seq = rec[_SEQ]
        return seq <= order.get("barrier", 0) or seq <= order.get((core, rec[_CORE]), 0)

    def _race(self, rec, lo, hi, write, core, pipe, site, op, mode) -> None:
        kind = "WAW" if (write and rec[_W]) else ("RAW" if not write else "WAR")
        a, b = Pipe(rec[_PIPE]), Pipe(pipe)
        olo, ohi = max(lo, rec[_LO]), min(hi, rec[_HI])
        mem = self.memory
        where = mem.describe(olo, ohi) if mem is not None else ""
        verb_new = "write" if write else "read"
        verb_old = "write" if rec[_W] else "read"
        if rec[_CORE] != core:
            msg = (f"{kind} hazard between cores in {self.name}{where}, bytes [{olo:#x}, {ohi:#x}): "
                   f"{self._who(core)} {b.label} {verb_new} ({op}) at {format_site(site)} overlaps "
                   f"{self._who(rec[_CORE])} {a.label} {verb_old} ({rec[_OP]}) at {format_site(rec[_SITE])}")
            if self.label is not None and (self._who(core)[:3] != self._who(rec[_CORE])[:3]):
                hint = ("the Cube and the Vector cores of a mix kernel exchange data through GM: the reader waits for "
                        "the writer, e.g. cross_core_set_flag(2, Pipe.FIX, id) after the AIC's fixpipe and "
                        "cross_core_wait_flag(id) before the AIV's copy in")
            elif ("(atomic" in op) != ("(atomic" in rec[_OP]):
                hint = ("an atomic write and a plain access of another core are not ordered: initialise the output "
                        "before any core adds to it (on the host, or in one block followed by sync_all()), and read "
                        "the sum only after a sync_all()")
            elif (rec[_LO], rec[_HI]) == (lo, hi) and rec[_SITE] == site and rec[_W] and write:
                # the same instruction writes the same bytes on two cores: the blocks duplicate one part
                hint = ("the same line writes the same bytes on both blocks: every block computes the same part. "
                        "Which part a block works on must follow from get_block_idx() (e.g. tiles block_idx, "
                        "block_idx + block_num, ...; or a range of its own). Only if the blocks really combine "
                        "into one result (a reduction): accumulate with set_atomic_add(dtype) before the copy to "
                        "GM, or write one partial result per block and combine them in a second launch")
            elif (rec[_LO], rec[_HI]) == (lo, hi):
                hint = ("every block touches the same bytes: a reduction across blocks. Accumulate with "
                        "set_atomic_add(dtype) before the copy to GM (atomic writes do not race), order the "
                        "blocks with sync_all(), or write one partial result per block (at offset "
                        "get_block_idx() * n) and combine the partials in a second launch")
            else:
                hint = ("give every block its own part of the tensor: offsets from get_block_idx() must not "
                        "overlap, and the last block must stop at the end")
        else:
            msg = (f"{kind} hazard in {self.name}{where}, bytes [{olo:#x}, {ohi:#x}) of block {core}: "
                   f"{b.label} {verb_new} ({op}) at {format_site(site)} is not ordered after "
                   f"{a.label} {verb_old} ({rec[_OP]}) at {format_site(rec[_SITE])}")
            owner = mem.owner_at(olo) if mem is not None else None
            hint = race_hint(kind, a, b, rec[_OP], op, owner)
        report(RaceError(msg, hint=hint, where=format_site(site), kind=kind, memory=self.name,
                         pipes=(a, b), cores=(rec[_CORE], core), address=(olo, ohi)), mode)


def sync_for(a, b) -> str:
    """What orders everything ``a`` issued before what ``b`` issues next: the HardEvent a_b where one exists,
    else a barrier (the HardEvents are the pipe pairs Ascend C defines; not every pair has one)."""
    for ev in HardEvent:
        if ev.value == (a, b):
            return f"set_flag/wait_flag the HardEvent {ev.name}"
    return f"pipe_barrier(Pipe.ALL) (no HardEvent orders {a.label} before {b.label})"


def race_hint(kind: str, a, b, op_a: str, op_b: str, owner) -> str:
    """The fix of a race between pipe ``a`` (earlier, ``op_a``) and ``b`` in one core. ``owner``: the
    TQue/TBuf whose buffer the bytes lie in, if any."""
    sync = sync_for(a, b)
    if Pipe.S in (a, b):  # queues order the DMA and compute pipes, never the scalar unit's own accesses
        return f"the scalar unit's accesses need a flag: {sync}"
    if getattr(owner, "producer", None) is None:  # GM or a TBuf: only flags order it
        first = {"RAW": "the reader must wait for the writer", "WAR": "the writer must wait until the reader "
                 "is done", "WAW": "order the two writes"}[kind]
        return f"{first}: {sync}"
    pq, cq = Pipe(owner.producer), Pipe(owner.consumer)
    # the (producer, consumer) a queue would need for these two accesses: WAR is the free -> alloc edge
    need = (b, a) if kind == "WAR" else (a, b)
    if need != (pq, cq):
        return _wrong_position(owner, pq, cq, need, a, b, op_a, op_b, sync)
    if kind == "RAW":
        return f"the reader must wait for the writer: enque after writing and deque before reading (or {sync})"
    if kind == "WAR":
        return (f"the writer must wait until the reader is done: free_tensor after reading and alloc_tensor "
                f"before writing (or {sync})")
    return f"order the two writes: a queue between them, or {sync}"


#: the queue whose enque/deque order (producer, consumer)
_QUEUE_FOR = {
    ("MTE2", "V"): "a TQue(TPosition.VECIN)",
    ("V", "MTE3"): "a TQue(TPosition.VECOUT)",
    ("MTE2", "MTE3"): "a TQueBind(TPosition.VECIN, TPosition.VECOUT) (a copy without compute)",
    ("MTE2", "MTE1"): "a TQue(TPosition.A1) or TQue(TPosition.B1)",
    ("MTE1", "M"): "a TQue(TPosition.A2) or TQue(TPosition.B2)",
    ("M", "FIX"): "a TQue(TPosition.CO1)",
    ("M", "V"): "a TQue(TPosition.CO1) (on a core without Fixpipe)",
}


def queue_text(q) -> str:
    """``'q_out' (VECOUT)`` or ``'q' (TQueBind(VECIN, VECOUT))`` for messages: the queue's name (or the
    kernel's variable) and its position."""
    name = q.name or guess_name(q)
    pos = q.position.name
    if getattr(q, "dst_position", None) is not None:
        pos = f"TQueBind({pos}, {q.dst_position.name})"
    return f"'{name}' ({pos})" if name else f"a {pos} queue"


def _wrong_position(owner, pq, cq, need, a, b, op_a, op_b, sync) -> str:
    better = _QUEUE_FOR.get((need[0].name, need[1].name))
    fix = (f"data that {need[0].label} produces for {need[1].label} goes through {better}"
           if better else f"no single queue orders {need[0].label} -> {need[1].label}: use one queue per step "
                          f"(e.g. VECIN for the copy in, VECOUT for the result), or {sync}")
    if (pq, cq) == (Pipe.MTE2, Pipe.MTE3) and Pipe.V in (a, b):
        fix += "; to compute, copy in through a TQue(VECIN) and compute into a TQue(VECOUT) tensor"
    return (f"the queue is at the wrong position: {queue_text(owner)} orders {pq.label} -> {cq.label} with "
            f"enque/deque, but this buffer is used by {a.label} ({op_a}) then {b.label} ({op_b}); {fix}")
