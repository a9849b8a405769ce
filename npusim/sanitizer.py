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

from .errors import RaceError, report

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


def call_site() -> tuple[str, int]:
    """(file, line) of the innermost frame outside the simulator itself: the kernel's own line."""
    f = sys._getframe(1)
    while f is not None and _is_internal(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return ("<unknown>", 0)
    return (f.f_code.co_filename, f.f_lineno)


def format_site(site: tuple[str, int]) -> str:
    fname, line = site
    return f"{os.path.basename(fname)}:{line}"


# record fields (a tuple is the cheapest record in CPython). A record covers blocks of ``blen`` bytes
# every ``pitch`` bytes from ``lo`` (``nblk`` of them); a contiguous access has pitch 0.
_LO, _HI, _W, _CORE, _PIPE, _EPOCH, _SITE, _OP, _PITCH, _BLEN, _NBLK = range(11)

_HAZARD_HINT = {
    "RAW": "the reader must wait for the writer: enque after writing and deque before reading "
           "(or set_flag/wait_flag the HardEvent {w}_{r})",
    "WAR": "the writer must wait until the reader is done: free_tensor after reading and alloc_tensor "
           "before writing (or set_flag/wait_flag the HardEvent {r}_{w})",
    "WAW": "order the two writes: a queue between them, or set_flag/wait_flag the HardEvent {a}_{b}",
}


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

    __slots__ = ("name", "shift", "reads", "writes", "describe", "_reported")

    def __init__(self, name: str, nbytes: int, describe=None):
        self.name = name
        # 4-64 KB buckets (about 64 per memory): a typical access touches one or two buckets, and
        # pruning keeps few live records in each
        self.shift = min(16, max(12, (max(nbytes, 1) >> 6).bit_length()))
        self.reads: dict[int, list] = {}   # bucket -> read records
        self.writes: dict[int, list] = {}  # bucket -> write records
        self.describe = describe  # (lo, hi) -> " (buffer 'x')" for messages

    def access(self, lo: int, hi: int, write: bool, core: int, pipe: int, vc, epoch: int,
               site, op: str, mode: str, pitch: int = 0, blen: int = 0, nblk: int = 1,
               key: int | None = None) -> None:
        """Check an access of bytes [lo, hi) (or ``nblk`` blocks of ``blen`` bytes every ``pitch``)
        against earlier ones, then remember it. ``key``: the on-chip buffer the access lies in; all its
        accesses share one bucket (buffers never overlap)."""
        if hi <= lo:
            return
        if pitch and (nblk <= 1 or blen >= pitch):
            pitch = 0
        if key is None:
            shift = self.shift
            keys = range(lo >> shift, ((hi - 1) >> shift) + 1)
        else:
            keys = (key,)
        reported = self._reported = None
        reads, writes = self.reads, self.writes
        strided = pitch != 0
        # a read can only race with writes; a write with both. Reads are kept apart so that the many
        # reads of an input never slow down the next read.
        for table in ((reads, writes) if write else (writes,)):
            for b in keys:
                lst = table.get(b)
                if not lst:
                    continue
                keep = None
                for i, rec in enumerate(lst):
                    if (rec[_LO] < hi and lo < rec[_HI]
                            and (rec[_CORE] != core or (rec[_PIPE] != pipe and vc[rec[_PIPE]] < rec[_EPOCH]))
                            and (not (strided or rec[_PITCH]) or _overlap(rec, lo, hi, pitch, blen, nblk))):
                        if reported is None or id(rec) not in reported:
                            reported = reported or set()
                            reported.add(id(rec))
                            self._race(rec, lo, hi, write, core, pipe, site, op, mode)
                    # a write that covers an older access supersedes it (it is ordered after it, or reported)
                    if write and not strided and rec[_LO] >= lo and rec[_HI] <= hi:
                        if keep is None:
                            keep = lst[:i]
                    elif keep is not None:
                        keep.append(rec)
                if keep is not None:
                    table[b] = keep
        rec = (lo, hi, write, core, pipe, epoch, site, op, pitch, blen, nblk)
        if write:
            table = writes
        else:
            table = reads
            if not strided:  # a contiguous read supersedes older reads of its own pipe that it covers
                for b in keys:
                    lst = reads.get(b)
                    if lst:
                        keep = [r for r in lst if not (r[_LO] >= lo and r[_HI] <= hi and r[_PIPE] == pipe
                                                       and r[_CORE] == core and not r[_PITCH])]
                        if len(keep) != len(lst):
                            reads[b] = keep
        for b in keys:
            lst = table.get(b)
            if lst is None:
                table[b] = [rec]
            else:
                lst.append(rec)

    def _race(self, rec, lo, hi, write, core, pipe, site, op, mode) -> None:
        from .pipes import Pipe

        kind = "WAW" if (write and rec[_W]) else ("RAW" if not write else "WAR")
        a, b = Pipe(rec[_PIPE]), Pipe(pipe)
        olo, ohi = max(lo, rec[_LO]), min(hi, rec[_HI])
        where = self.describe(olo, ohi) if self.describe else ""
        verb_new = "write" if write else "read"
        verb_old = "write" if rec[_W] else "read"
        if rec[_CORE] != core:
            msg = (f"{kind} hazard between cores in {self.name}{where}, bytes [{olo:#x}, {ohi:#x}): "
                   f"block {core} {b.label} {verb_new} ({op}) at {format_site(site)} overlaps "
                   f"block {rec[_CORE]} {a.label} {verb_old} ({rec[_OP]}) at {format_site(rec[_SITE])}")
            hint = ("give every block its own part of the tensor: offsets from get_block_idx() must not "
                    "overlap, and the last block must stop at the end")
        else:
            msg = (f"{kind} hazard in {self.name}{where}, bytes [{olo:#x}, {ohi:#x}) of block {core}: "
                   f"{b.label} {verb_new} ({op}) at {format_site(site)} is not ordered after "
                   f"{a.label} {verb_old} ({rec[_OP]}) at {format_site(rec[_SITE])}")
            hint = _HAZARD_HINT[kind].format(w=a.name, r=b.name, a=a.name, b=b.name) if kind != "WAR" else \
                _HAZARD_HINT[kind].format(r=a.name, w=b.name)
        report(RaceError(msg, hint=hint, where=format_site(site), kind=kind, memory=self.name,
                         pipes=(a, b), cores=(rec[_CORE], core), address=(olo, ohi)), mode)
