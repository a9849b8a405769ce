"""The speed work of issue 18 computes what the code before it computed: each rewritten function against
a verbatim copy of its earlier version (``_before``), on generated inputs, bit for bit.

The pins (``test_core_timing_pins.py``) cover whole launches; these cover the inputs the bench cases
never make: garbage (NaN, inf) in fractal padding, accumulation, strided and overlapping accesses on
several pipes and cores, races in "warn" mode, DMA shapes at every alignment.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core_helpers import BF16, FAST, assert_bits_equal
from npusim import costs, numerics
from npusim.config import get_config
from npusim.dtypes import int32
from npusim.errors import SanitizerWarning
from npusim.memsys import MemorySystem
from npusim.sanitizer import (_CORE, _EPOCH, _HI, _LO, _PIPE, _PITCH, _SEQ, AccessTracker,  # noqa: F401
                              _overlap)

pytestmark = pytest.mark.core


# --- numerics.mmad -----------------------------------------------------------------------------------
_F16_TO_F64 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)


def _to_f64_before(x: np.ndarray) -> np.ndarray:
    """The float64 conversion of numerics before issue 18's second pass (a table for fp16)."""
    if x.dtype == np.float16:
        return _F16_TO_F64.take(x.view(np.uint16))
    return x.astype(np.float64)


def _mmad_before(c_nz: np.ndarray, a_zz: np.ndarray, b_zn: np.ndarray, k: int, accumulate: bool) -> None:
    """numerics.mmad before issue 18."""
    m1, k1, _, k0 = a_zz.shape
    n1 = b_zn.shape[1]
    acc_t = c_nz.dtype
    # logical A (M, K') and B (K', N) in float64 (exact for every input type, and int8 sums stay exact
    # below 2**53), converted while being rearranged
    A = _to_f64_before(a_zz.transpose(0, 2, 1, 3)).reshape(m1 * 16, k1 * k0)
    B = _to_f64_before(b_zn.transpose(0, 3, 1, 2)).reshape(k1 * k0, n1 * 16)
    if k < k1 * k0:
        A[:, k:] = 0
        B[k:, :] = 0
    old = c_nz.transpose(1, 2, 0, 3).reshape(m1 * 16, n1 * 16) if accumulate else None
    with np.errstate(all="ignore"):  # padding may hold garbage; it stays in padding
        if acc_t == int32:
            out = (A @ B).astype(np.int64)
            if accumulate:
                out += old
            out = out.astype(np.int32)  # wraps modulo 2**32 like the int32 accumulator
        elif acc_t.itemsize >= 4:
            out = A @ B  # exact for fp16/bf16 inputs; rounded once into the fp32 accumulator
            out = (out + old).astype(acc_t) if accumulate else out.astype(acc_t)
        else:  # fp16 accumulator: rounded after every K0 block, which is where its error grows
            parts = np.matmul(A.reshape(-1, k1, k0).transpose(1, 0, 2),
                              B.reshape(k1, k0, -1)).astype(acc_t)
            out = old + parts[0] if accumulate else parts[0].copy()
            for j in range(1, k1):
                out += parts[j]
    c_nz[...] = out.reshape(m1, 16, n1, 16).transpose(2, 0, 1, 3)


@FAST
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.sampled_from(["float16", "bfloat16", "float32"]),
       st.booleans(), st.integers(0, 15), st.integers(0, 2 ** 32 - 1))
def test_mmad_into_fp32_is_bit_identical_to_before(m1, n1, k1, ind, accumulate, cut, seed):
    dt = BF16 if ind == "bfloat16" else np.dtype(ind)
    k0 = 32 // dt.itemsize
    k = max(1, k1 * k0 - cut % k0)     # a K0 tail the Mmad leaves out
    rng = np.random.default_rng(seed)
    def raw(shape, dtype):             # any bit pattern: padding may hold NaN and inf
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return rng.integers(0, 256, n, dtype=np.uint8).view(dtype).reshape(shape)
    def normal(shape, dtype):
        return rng.standard_normal(shape).astype(dtype)
    make = raw if seed % 2 else normal
    a, b = make((m1, k1, 16, k0), dt), make((k1, n1, 16, k0), dt)
    c = make((n1, m1, 16, 16), np.float32)
    want, got = c.copy(), c.copy()
    with warnings.catch_warnings():   # casting NaN bf16 to float64 warns, before and after
        warnings.simplefilter("ignore")
        _mmad_before(want, a, b, k, accumulate)
        numerics.mmad(got, a, b, k, accumulate)
    assert_bits_equal(got, want, "mmad")


# --- AccessTracker.access ----------------------------------------------------------------------------
class _TrackerBefore(AccessTracker):
    __slots__ = ()

    def access(self, lo: int, hi: int, write: bool, core: int, pipe: int, vc, epoch: int,
               site, op: str, mode: str, pitch: int = 0, blen: int = 0, nblk: int = 1,
               key: int | None = None, grain: int = 0) -> None:
        """AccessTracker.access before issue 18."""
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
            keys = range(lo >> shift, ((hi - 1) >> shift) + 1)
        else:
            keys = (key,)
        found = None  # id -> conflicting record
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
                        if found is None:
                            found = {}
                        found[id(rec)] = rec
                    # a write that covers an older access supersedes it (it is ordered after it, or reported)
                    if write and not strided and rec[_LO] >= lo and rec[_HI] <= hi:
                        if keep is None:
                            keep = lst[:i]
                    elif keep is not None:
                        keep.append(rec)
                if keep is not None:
                    table[b] = keep
        if found:
            # the latest conflicting access first: what orders this one after it is the fix to suggest
            for r in sorted(found.values(), key=lambda r: r[_SEQ], reverse=True):
                self._race(r, lo, hi, write, core, pipe, site, op, mode)
        self.seq = seq = self.seq + 1
        rec = (lo, hi, write, core, pipe, epoch, site, op, pitch, blen, nblk, seq)
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



_ACCESS = st.tuples(
    st.integers(0, 15),                  # first 256 B unit
    st.integers(1, 6),                   # units
    st.booleans(),                       # write
    st.integers(0, 1),                   # core
    st.integers(1, 5),                   # pipe
    st.sampled_from([0, 0, 0, 512, 768]),  # pitch (0: contiguous)
    st.integers(1, 4),                   # blocks
    st.integers(0, 3),                   # sync: pipe whose clock the access's pipe merges first
)


def _run(cls, ops, keyed: bool):
    t = cls("UB" if keyed else "GM 'x'", 1 << 14)
    vc = [[0] * 7 for _ in range(7)]
    found = []
    for i, (u, n, write, core, pipe, pitch, nblk, sync) in enumerate(ops):
        if sync:   # a flag from pipe ``sync`` orders everything it did before this pipe's next access
            vc[pipe][:] = map(max, vc[pipe], vc[sync])
        vc[pipe][pipe] += 1
        lo = u * 256
        blen = n * 64
        hi = lo + ((nblk - 1) * pitch + blen if pitch else n * 256)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always", SanitizerWarning)
            t.access(lo, hi, write, core, pipe, vc[pipe], vc[pipe][pipe], ("k.py", i), "op", "warn",
                     pitch, blen if pitch else 0, nblk if pitch else 1, key=0 if keyed else None)
        found.append([str(x.message) for x in w])
    tables = {name: {b: [r[:6] + r[8:] for r in lst] for b, lst in getattr(t, name).items() if lst}
              for name in ("reads", "writes")}
    return found, tables


@settings(FAST, max_examples=200)   # fast: a sequence of 40 accesses takes a millisecond
@given(st.lists(_ACCESS, min_size=1, max_size=40), st.booleans())
def test_tracker_reports_and_remembers_what_it_did_before(ops, keyed):
    assert _run(AccessTracker, ops, keyed) == _run(_TrackerBefore, ops, keyed)


# --- MemorySystem.dma_parts --------------------------------------------------------------------------
@FAST
@given(st.integers(0, 1 << 20), st.integers(1, 300), st.integers(1, 4096), st.integers(0, 8192))
def test_memoised_dma_parts_equal_the_cost_formula(addr, count, nbytes, stride):
    cfg = get_config(None)
    ms = MemorySystem(cfg, 1)
    g0 = cfg.gm_burst_granule_bytes
    for a in (addr, addr + 512, addr + 4096):   # the second and third come from the memo
        fixed, weighted, moved = ms.dma_parts(a, count, nbytes, stride)
        assert (fixed, weighted) == costs.gm_dma_parts(cfg, a, count, nbytes, stride)
        assert moved == count * -(-nbytes // g0) * g0


# --- Mmad operands converted once per content of L0A/L0B ---------------------------------------------
def _reloads(a_zz, b_zn, c):
    """Mmad with A and B resident, then with new A fractals in the same L0A tensor (load_data), then with
    new B fractals through load_data_3d's sibling path (load_data into L0B): each result is drained."""
    import npusim as ns

    H = ns.HardEvent
    pipe = ns.TPipe()
    l1, l0a, l0b, l0c = (ns.TBuf(p) for p in (ns.TPosition.A1, ns.TPosition.A2, ns.TPosition.B2, ns.TPosition.CO1))
    for buf, n in ((l1, 4 * 512), (l0a, 512), (l0b, 512), (l0c, 1024)):
        pipe.init_buffer(buf, n)
    src, a, b, acc = l1.get(ns.float16), l0a.get(ns.float16), l0b.get(ns.float16), l0c.get(ns.float32)
    ns.data_copy(src, a_zz, 4 * 256)
    ns.set_flag(H.MTE2_MTE1, 0)
    ns.wait_flag(H.MTE2_MTE1, 0)
    for step, (fa, fb) in enumerate(((0, 1), (0, 1), (2, 1), (2, 3))):
        ns.load_data(a, src, ns.LoadData2DParams(start_index=fa))
        ns.load_data(b, src, ns.LoadData2DParams(start_index=fb, if_transpose=True))
        ns.set_flag(H.MTE1_M, 0)
        ns.wait_flag(H.MTE1_M, 0)
        ns.mmad(acc, a, b, ns.MmadParams(16, 16, 16))
        ns.set_flag(H.M_FIX, 0)
        ns.wait_flag(H.M_FIX, 0)
        ns.fixpipe(c[step * 256:], acc, ns.FixpipeParams(16, 16))
        ns.set_flag(H.FIX_M, 0)
        ns.wait_flag(H.FIX_M, 0)
        ns.set_flag(H.M_MTE1, 0)
        ns.wait_flag(H.M_MTE1, 0)


def test_an_mmad_operand_rewritten_in_l0_is_converted_again():
    import npusim as ns

    rng = np.random.default_rng(5)
    fr = rng.standard_normal((4, 16, 16)).astype(np.float16)   # four 16 x 16 fractals
    c = np.zeros(4 * 256, np.float32)
    ns.launch(_reloads, 1, fr.reshape(-1), np.zeros(1, np.float16), c)
    got = c.reshape(4, 16, 16)
    f = fr.astype(np.float64)
    for step, (fa, fb) in enumerate(((0, 1), (0, 1), (2, 1), (2, 3))):
        assert np.array_equal(got[step], (f[fa] @ f[fb]).astype(np.float32)), step   # B: fractal fb, transposed into ZN
