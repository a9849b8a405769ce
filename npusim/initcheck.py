"""Initialisation tracking (msSanitizer's initcheck): reads of on-chip bytes no instruction wrote.

On-chip memory starts as 0xFF bytes: NaN in fp16/fp32/bf16, but -1 in int32, which can look plausible.
Every on-chip memory of a core keeps one "written in this launch" flag per byte. The access tracker
(:mod:`npusim.sanitizer`) sees every access of every instruction and hands it here: a write sets its
bytes, a read checks them. A write covers what the instruction defines, padding included: the whole 32 B
blocks of ``data_copy_pad``, the zero rows and columns of an Nd2Nz copy, the whole fractals of
``load_data``/``load_data_3d`` and ``mmad``, the per-repeat partials of a reduction.

What counts as initialised:

- on-chip memory (UB, L1, L0A, L0B, L0C): the bytes an instruction of this block wrote earlier in
  program order in this launch. Freeing a buffer does not forget its bytes: a new tensor in the same
  buffer reads the old tile (stale, but written), as on hardware.
- GM: every byte of every array passed to the launch. npusim cannot tell an input from an output (an
  ``np.empty`` output has bytes the host chose not to set); reading another block's output is a race.

Each access pattern is checked once: a range found written stays written, so the steady state of a tile
loop costs one set lookup per access. ``sanitize="off"`` turns this off with the race checker.
"""

from __future__ import annotations

import numpy as np

from .errors import UninitializedReadError, report
from .pipes import Pipe
from .sanitizer import format_site

#: Off only to measure what initcheck costs (``npusim bench --only initcheck``).
ENABLED = True


class InitMap:
    """The "written" flag of every byte of one on-chip memory of one core, for one launch."""

    __slots__ = ("bits", "done", "memory")

    def __init__(self, memory):
        self.memory = memory  # npusim.core.Memory: name, and describe() for messages
        self.bits = np.zeros(memory.capacity, dtype=np.bool_)
        # keys of the accesses found written: ``lo << 32 | hi`` for a contiguous range, else a tuple
        # (the tracker computes them inline, before calling update)
        self.done: set = set()

    def _bytes(self, lo: int, hi: int, pitch: int, blen: int, nblk: int) -> np.ndarray:
        if not pitch:
            return self.bits[lo:hi]
        return np.ndarray((nblk, blen), np.bool_, self.bits, lo, (pitch, 1))

    def update(self, key, lo: int, hi: int, write: bool, pitch: int, blen: int, nblk: int, core: int,
               pipe: int, site, op: str, mode: str, grain: int = 0) -> None:
        """An access whose key is not yet known to be written: mark (write) or check (read) its bytes.
        With ``grain``, a read needs one written byte in each ``grain`` bytes (whole-fractal reads)."""
        v = self._bytes(lo, hi, pitch, blen, nblk)
        if write:
            v[...] = True
        else:
            ok = v.reshape(-1, grain).any(axis=1).repeat(grain) if grain else v.ravel()
            if not ok.all():
                self._report(ok, v.size, lo, hi, pitch, blen, nblk, core, pipe, site, op, mode)
                v[...] = True  # reported once (sanitize="warn" carries on with whatever the bytes hold)
        self.done.add(key)

    def _report(self, ok, size, lo, hi, pitch, blen, nblk, core, pipe, site, op, mode) -> None:
        if pitch:
            addr = (lo + np.arange(nblk)[:, None] * pitch + np.arange(blen)[None, :]).ravel()
        else:
            addr = np.arange(lo, hi)
        bad = addr[~ok]
        first = int(bad[0])
        gaps = np.flatnonzero(np.diff(bad) != 1)  # the first unwritten run ends at the first gap
        end = int(bad[gaps[0] if gaps.size else -1]) + 1
        mem = self.memory
        p = Pipe(pipe)
        msg = (f"read of uninitialised memory in {mem.name}{mem.describe(first, end)}, bytes [{first:#x}, "
               f"{end:#x}) of block {core}: {p.label} read ({op}) at {format_site(site)}, but no instruction "
               f"wrote these bytes in this launch ({bad.size} of the {size} B it reads; they hold 0xFF: NaN "
               f"in float, -1 in int32)")
        report(UninitializedReadError(msg, hint=hint(mem.name, op, p), where=format_site(site), memory=mem.name,
                                      address=(first, end), unwritten=int(bad.size), op=op, pipe=p), mode)


def hint(memory: str, op: str, pipe) -> str:
    """What writes these bytes in a correct kernel, by the memory and the instruction that read them."""
    if memory == "L0C" and op == "mmad":
        return ("Mmad adds onto L0C only with cmatrix_init_val=False (accumulate=True); the first K step must "
                "overwrite it: MmadParams(m, n, k, cmatrix_init_val=(k_offset == 0)), later steps accumulate")
    if memory == "L0C":
        return ("no mmad wrote this part of L0C: run mmad into the tensor before draining it, and drain only "
                "the m x n it computed; a K loop that runs zero times (K = 0) writes nothing, and the product "
                "is then zero: write zeros to GM instead (duplicate in UB, then data_copy out)")
    if memory in ("L0A", "L0B"):
        return (f"load_data (or load_data_3d) the fractals into {memory} before mmad reads them; mmad reads "
                f"whole 16 x K0 fractals: ceil(m/16) x ceil(k/K0) of a, ceil(k/K0) x ceil(n/16) of b")
    if memory == "L1":
        return ("copy the data into L1 first: data_copy(l1_tensor, gm_tensor[offset:], Nd2NzParams(...)) for the "
                "Cube's NZ layout, or a count, before load_data or fixpipe reads it")
    if pipe.name == "MTE3":
        return ("nothing wrote this UB tensor before it is copied out: compute into it (e.g. "
                "add(z_local, x_local, y_local, count)) or copy data into it before data_copy(gm, z_local, count)")
    return ("copy the data in first: data_copy(x_local, x_gm[offset:], count) (GM -> UB) before an "
            "instruction reads the tensor, or fill it with duplicate(); a tensor from alloc_tensor or TBuf.get "
            "holds no data of its own")
