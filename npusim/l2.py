"""The L2 cache that every core of the chip shares in front of HBM: which GM lines a DMA finds there.

GM is cut into lines of ``HardwareConfig.l2_line_bytes`` (512 B), counted per launch argument (GM
buffers start on 512 B boundaries, so a line never spans two). For each line the cache remembers when it
was last touched and from what time on its data is in L2:

- **read**: a line is a *hit* when it is resident and its data arrived before the read starts; a *wait*
  when it is resident but arrives later (another core fetched it at about the same time: this read waits
  for that fetch, at HBM speed, without fetching it again); else a *miss*: it is fetched from HBM, and
  from the end of this DMA on it is in L2.
- **write**: write-back with allocate: the line is in L2 from the end of the write on, so a later kernel
  (or core) can read it from there; :mod:`npusim.memsys` writes the bytes back to HBM in the background.
- **replacement**: :class:`L2Cache` is a footprint model: a line stays resident until ``l2_bytes`` of
  *new* lines (misses and write allocations) have entered the cache after its last use. This equals LRU
  whenever what a launch touches fits in L2, and never evicts earlier than LRU otherwise.
  :class:`LruL2Cache` is exact LRU on the same lines, kept to measure the footprint model against (see
  ``docs/cost-model.md``: same hits on every benchmark case, many times faster).

Blocks of a launch are simulated one after another, so "before" and "after" are simulated times, not
the order of simulation: that is what the *wait* state is for.

A cache lives for one launch by default (cold: single-kernel figures are reproducible). Pass one to
several launches (``launch(..., l2=cache)``, or ``with npusim.shared_l2():``) and what one kernel wrote or
read is still there for the next (warm), e.g. a layer's output for the next layer.
"""

from __future__ import annotations

from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from .config import HardwareConfig, get_config

_NEVER = np.iinfo(np.int64).min // 2
_MIN, _MAX = np.minimum.reduce, np.maximum.reduce   # ndarray.min/max without their Python wrappers


def line_span(first: int, count: int, nbytes: int, stride: int, line: int) -> "slice | np.ndarray":
    """The line numbers touched by ``count`` bursts of ``nbytes``, ``stride`` bytes apart, the first at
    byte offset ``first`` of its buffer: a ``slice`` when they are consecutive, else a sorted array of
    distinct line numbers."""
    if count < 1 or nbytes < 1:
        return slice(0, 0)
    if count == 1 or stride == nbytes:
        return slice(first // line, (first + count * nbytes - 1) // line + 1)
    key = (first % line, count, nbytes, stride, line)
    rel = _PATTERNS.get(key)
    if rel is None:   # strided copies repeat the same few patterns: compute each once
        rel = _strided_lines(first % line, count, nbytes, stride, line)
        if len(_PATTERNS) > 4096:
            _PATTERNS.clear()
        _PATTERNS[key] = rel
    base = first // line
    return slice(rel.start + base, rel.stop + base) if isinstance(rel, slice) else rel + base


_PATTERNS: dict[tuple, "slice | np.ndarray"] = {}


def _strided_lines(first: int, count: int, nbytes: int, stride: int, line: int) -> "slice | np.ndarray":
    starts = first + stride * np.arange(count, dtype=np.int64)
    lo, hi = starts // line, (starts + nbytes - 1) // line
    width = int((hi - lo).max()) + 1
    if width == 1:
        lines = lo
    else:
        grid = lo[:, None] + np.arange(width)[None, :]
        lines = grid[grid <= hi[:, None]]
    if lines.size > 1 and not np.all(lines[1:] > lines[:-1]):  # bursts that share lines: each line once
        lines = np.unique(lines)
    if lines[-1] - lines[0] + 1 == lines.size:
        return slice(int(lines[0]), int(lines[-1]) + 1)
    return lines


class _Buffer:
    """Per-line state of one GM buffer: the insertion clock at its last use, and when its data is in L2.

    Lines past ``high`` were never touched. A first touch of lines there (streaming) is only noted in
    ``fresh`` and written into the arrays when a later access needs them, which keeps streaming cheap."""

    __slots__ = ("nlines", "_used", "_ready", "high", "fresh")

    def __init__(self, nlines: int):
        self.nlines = nlines
        self._used = self._ready = None
        self.high = 0
        self.fresh: list[tuple[int, int, int, float]] = []   # (first line, end line, clock, ready)

    def grow(self, nlines: int) -> None:
        if nlines > self.nlines:
            if self._used is not None:
                extra = nlines - self.nlines
                self._used = np.concatenate([self._used, np.full(extra, _NEVER, dtype=np.int64)])
                self._ready = np.concatenate([self._ready, np.full(extra, np.inf)])
            self.nlines = nlines

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(used, ready)`` with every noted first touch applied."""
        if self._used is None:
            self._used = np.full(self.nlines, _NEVER, dtype=np.int64)
            self._ready = np.full(self.nlines, np.inf)
        if self.fresh:
            used, ready = self._used, self._ready
            for lo, hi, clock, t in self.fresh:
                used[lo:hi] = clock
                ready[lo:hi] = t
            self.fresh.clear()
        return self._used, self._ready


class L2Cache:
    """The chip's L2 (footprint model, see the module docstring) for one launch or, passed on, several.

    :meth:`buffer` gives the state of one GM buffer (by a key: the launch argument's host memory), once
    per launch; ``read`` / ``write`` take it, the lines touched (:func:`line_span`) and the simulated time;
    ``read`` returns ``(hits, waits, misses, pending)`` line counts and a handle that :meth:`settle`
    completes with the DMA's end time.
    """

    policy = "footprint"

    def __init__(self, config: HardwareConfig | str | None = None):
        cfg = get_config(config)
        self.config = cfg
        self.line_bytes = cfg.l2_line_bytes
        self.capacity_lines = cfg.l2_bytes // cfg.l2_line_bytes
        self.clock = 0          # lines that have entered the cache so far
        self._buffers: dict[tuple, _Buffer] = {}

    def buffer(self, key: tuple, nlines: int) -> _Buffer:
        """The lines of the buffer ``key`` (at least ``nlines`` of them), for :meth:`read` and :meth:`write`."""
        b = self._buffers.get(key)
        if b is None:
            b = self._buffers[key] = _Buffer(nlines)
        elif b.nlines < nlines:
            b.grow(nlines)
        return b

    def begin_launch(self) -> None:
        """A new launch starts at time 0 and everything resident is already there."""
        for b in self._buffers.values():
            used, ready = b.arrays()
            np.minimum(ready, -np.inf, out=ready, where=used > self.clock - self.capacity_lines)

    def read(self, b: _Buffer, lines, t: float):
        if type(lines) is slice and lines.start >= b.high:   # never touched: all misses, no lookup
            n = lines.stop - lines.start
            self.clock += n
            b.high = lines.stop
            return 0, 0, n, (b, lines, None, self.clock)
        b_used, b_ready = b.arrays()
        used = b_used[lines]
        floor = self.clock - self.capacity_lines
        if type(lines) is slice:
            if lines.stop > b.high:
                b.high = lines.stop
            elif _MIN(used, None) > floor and _MAX(b_ready[lines], None) <= t:   # all hits (all touched before)
                used.fill(self.clock)
                return used.size, 0, 0, (b, lines, True, True, 0, 0)
        else:
            b.high = max(b.high, int(lines[-1]) + 1)
        resident = used > floor
        ready = b_ready[lines]
        hit = resident & (ready <= t)
        n_hit = int(np.count_nonzero(hit))
        n_res = int(np.count_nonzero(resident))
        n_miss = used.size - n_res
        self.clock += n_miss
        b_used[lines] = self.clock
        return n_hit, n_res - n_hit, n_miss, (b, lines, resident, hit, n_miss, n_res - n_hit)

    def settle(self, handle, t_end: float) -> None:
        """The DMA of a :meth:`read` ended at ``t_end``: the lines it fetched (or waited for) are in L2."""
        if handle[2] is None:   # a first touch (b, lines, None, clock): noted, applied when needed
            b, lines, _, clock = handle
            b.fresh.append((lines.start, lines.stop, clock, t_end))
            return
        b, lines, resident, hit, n_miss, n_wait = handle
        if not (n_miss or n_wait):
            return
        b_ready = b.arrays()[1]
        ready = b_ready[lines]   # a copy for an array of lines, a view for a slice
        if n_miss:
            ready[~resident] = t_end
        if n_wait:
            waited = resident & ~hit
            ready[waited] = np.minimum(ready[waited], t_end)
        b_ready[lines] = ready

    def write(self, b: _Buffer, lines, t_end: float) -> None:
        """A write of ``lines`` ended at ``t_end`` (write-back with allocate: they are resident from then)."""
        if type(lines) is slice and lines.start >= b.high:   # never touched: allocate, no lookup
            self.clock += lines.stop - lines.start
            b.fresh.append((lines.start, lines.stop, self.clock, t_end))
            b.high = lines.stop
            return
        b.high = max(b.high, (lines.stop if type(lines) is slice else int(lines[-1]) + 1))
        b_used, b_ready = b.arrays()
        fresh = b_used[lines] <= self.clock - self.capacity_lines
        self.clock += int(np.count_nonzero(fresh))
        b_used[lines] = self.clock
        ready = b_ready[lines]
        ready[fresh] = t_end
        np.minimum(ready, t_end, out=ready)
        b_ready[lines] = ready

    def resident_bytes(self) -> int:
        """Bytes of lines the cache holds now."""
        floor = self.clock - self.capacity_lines
        return sum(int(np.count_nonzero(b.arrays()[0] > floor)) for b in self._buffers.values()) * self.line_bytes


class LruL2Cache(L2Cache):
    """Exact LRU on the same lines (one Python dict operation per line): the reference the footprint
    model was measured against. Same interface as :class:`L2Cache`."""

    policy = "lru"

    def __init__(self, config: HardwareConfig | str | None = None):
        super().__init__(config)
        self._lru: OrderedDict[tuple, float] = OrderedDict()   # (key, line) -> time its data is in L2

    def begin_launch(self) -> None:
        for k in self._lru:
            self._lru[k] = -np.inf

    def _insert(self, k, t) -> None:
        self._lru[k] = t
        self.clock += 1
        if len(self._lru) > self.capacity_lines:
            self._lru.popitem(last=False)

    def buffer(self, key: tuple, nlines: int) -> tuple:
        return key

    def read(self, key: tuple, lines: np.ndarray, t: float):
        lru = self._lru
        hits = waits = 0
        missed, waited = [], []
        for ln in _as_list(lines):
            k = (key, ln)
            ready = lru.get(k)
            if ready is None:
                missed.append(k)
                self._insert(k, np.inf)
                continue
            lru.move_to_end(k)
            if ready <= t:
                hits += 1
            else:
                waits += 1
                waited.append(k)
        return hits, waits, len(missed), (missed, waited)

    def settle(self, handle, t_end: float) -> None:
        missed, waited = handle
        lru = self._lru
        for k in missed:
            if k in lru:
                lru[k] = t_end
        for k in waited:
            if k in lru:
                lru[k] = min(lru[k], t_end)

    def write(self, key: tuple, lines: np.ndarray, t_end: float) -> None:
        lru = self._lru
        for ln in _as_list(lines):
            k = (key, ln)
            if k in lru:
                lru.move_to_end(k)
                lru[k] = min(lru[k], t_end)
            else:
                self._insert(k, t_end)

    def resident_bytes(self) -> int:
        return len(self._lru) * self.line_bytes


def _as_list(lines) -> list[int]:
    return list(range(lines.start, lines.stop)) if isinstance(lines, slice) else lines.tolist()


_shared: list[L2Cache] = []


def current_shared() -> L2Cache | None:
    """The cache of the innermost :func:`shared_l2` block, if any."""
    return _shared[-1] if _shared else None


@contextmanager
def shared_l2(config: HardwareConfig | str | None = None, cache: L2Cache | None = None) -> Iterator[L2Cache]:
    """Every launch inside the block shares one L2 (warm): what a kernel leaves in L2 is there for the
    next, as on hardware when kernels run back to back. Launches outside start cold."""
    c = cache if cache is not None else L2Cache(config)
    _shared.append(c)
    try:
        yield c
    finally:
        _shared.pop()
