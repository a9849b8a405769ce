"""Hand-computed timing: single copies, overlap between pipes, serialisation on one pipe, double buffering,
waves of blocks, GM bandwidth sharing, queue depth, barriers and flags.

Expected numbers come from the formulas of npusim.costs (written out in core_helpers) and HardwareConfig."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import npusim as ns
from npusim.memsys import WINDOW

from core_helpers import FEW, hand_gm, hand_vector, records

pytestmark = pytest.mark.core

H = ns.HardEvent
CFG = ns.a2
ISSUE = CFG.scalar_issue_cycles


@ns.kernel
def one_copy(x, n, addrs, offset=0):
    pipe = ns.TPipe()
    b = ns.TBuf()
    pipe.init_buffer(b, n * x.dtype.itemsize)
    addrs["x"] = x[offset:].byte_addr()
    ns.data_copy(b.get(x.dtype), x[offset:], n)


@FEW
@given(blocks=st.integers(1, 2048), offset=st.integers(0, 300))
def test_single_gm_to_ub_copy_takes_the_formula(blocks, offset):
    n = blocks * 16
    x = np.zeros(offset + n, np.float16)
    addrs = {}
    res = ns.launch(one_copy, 1, x, n, addrs, offset)
    nbytes = n * 2
    # gm_startup + one burst: overhead + bytes / rate, at 70 % when the address is not aligned to the burst
    burst_align = min(CFG.gm_efficient_align_bytes, max(32, 1 << (nbytes - 1).bit_length()))
    eff = 1.0 if addrs["x"] % burst_align == 0 else CFG.gm_unaligned_efficiency
    cost = CFG.gm_startup_cycles + CFG.gm_burst_overhead_cycles + nbytes / (CFG.gm_rate(1) * eff)
    (r,) = records(res, "data_copy")
    assert (r.pipe, r.nbytes) == (ns.Pipe.MTE2, nbytes)
    assert r.end - r.start == pytest.approx(cost)
    assert r.start <= ISSUE  # issued by the first scalar slot
    assert res.profile.total_cycles == pytest.approx(r.end)
    assert res.profile.pipe_busy_cycles["mte2"] == pytest.approx(cost)
    assert res.profile.pipe_busy_cycles["scalar"] == ISSUE


def test_a_16_kb_copy_reaches_80_percent_of_the_port_peak():
    """The documented calibration of gm_startup_cycles: "a 16 KB copy reaches 80 % of the port peak"."""
    x = np.zeros(8192, np.float16)
    (r,) = records(ns.launch(one_copy, 1, x, 8192, {}), "data_copy")
    achieved = 16384 / (r.end - r.start)
    assert achieved / CFG.gm_port_bytes_per_cycle == pytest.approx(0.8, abs=0.02)


def test_single_copy_total_includes_its_scalar_issue():
    x = np.zeros(4096, np.float16)
    addrs = {}
    res = ns.launch(one_copy, 1, x, 4096, addrs)
    expected = CFG.scalar_issue_cycles + hand_gm(CFG, [(addrs["x"], 8192)], CFG.gm_rate(1))
    assert res.profile.total_cycles == expected


def test_unaligned_gm_address_runs_at_70_percent():
    x, x2 = np.zeros(4096 + 16, np.float16), np.zeros(4096 + 16, np.float16)

    @ns.kernel
    def k(x, x2):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 8192)
        ns.data_copy(b.get(ns.float16), x, 4096)        # 512 B aligned
        ns.data_copy(b.get(ns.float16), x2[16:], 4096)  # 32 B aligned only (another array: L2 is cold)

    aligned, unaligned = records(ns.launch(k, 1, x, x2, sanitize="off"), "data_copy")
    move = 8192 / CFG.gm_rate(1)
    fixed = CFG.gm_startup_cycles + CFG.gm_burst_overhead_cycles
    assert aligned.end - aligned.start == pytest.approx(fixed + move)
    assert unaligned.end - unaligned.start == pytest.approx(fixed + move / CFG.gm_unaligned_efficiency)


# ---------------------------------------------------------------------------------------------------------
# overlap between pipes, serialisation on one pipe
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def two_copies(x, y, n, same_pipe, addrs):
    pipe = ns.TPipe()
    a, b = ns.TBuf(), ns.TBuf()
    pipe.init_buffer(a, n * 2)
    pipe.init_buffer(b, n * 2)
    addrs["x"], addrs["y"] = x.byte_addr(), y.byte_addr()
    ns.data_copy(a.get(ns.float16), x, n)          # MTE2 into a
    if same_pipe:
        ns.data_copy(b.get(ns.float16), y, n)      # MTE2 into b
    else:
        ns.data_copy(y, b.get(ns.float16), n)      # MTE3 out of b: no dependency on a


@FEW
@given(n1=st.integers(1, 512), same=st.booleans())
def test_two_copies_overlap_on_two_pipes_and_serialise_on_one(n1, same):
    n = n1 * 16
    x, y = np.zeros(n, np.float16), np.zeros(n, np.float16)
    addrs = {}
    res = ns.launch(two_copies, 1, x, y, n, same, addrs, sanitize="off")  # b is copied out unwritten
    c1 = hand_gm(CFG, [(addrs["x"], 2 * n)], CFG.gm_rate(1))
    c2 = hand_gm(CFG, [(addrs["y"], 2 * n)], CFG.gm_rate(1))
    r1, r2 = records(res, "data_copy")
    assert r1.end - r1.start == pytest.approx(c1) and r2.end - r2.start == pytest.approx(c2)
    total = res.profile.total_cycles
    if same:
        assert r1.pipe == r2.pipe == ns.Pipe.MTE2
        assert r2.start == pytest.approx(r1.end)             # the second waits for the first
        assert total == pytest.approx(r1.start + c1 + c2)   # the sum, plus when the first was issued
        assert r1.start <= ISSUE
    else:
        assert (r1.pipe, r2.pipe) == (ns.Pipe.MTE2, ns.Pipe.MTE3)
        assert r2.start == pytest.approx(r1.start + ISSUE)  # issued one scalar slot later, runs at once
        assert total == pytest.approx(max(r1.end, r2.end))
        assert total < c1 + c2
        assert total == pytest.approx(max(r1.start + c1, r1.start + ISSUE + c2))


def test_set_flag_makes_the_consumer_wait_for_the_producer():
    @ns.kernel
    def k(x, flag):
        pipe = ns.TPipe()
        a, b = ns.TBuf(), ns.TBuf()
        pipe.init_buffer(a, 8192)
        pipe.init_buffer(b, 8192)
        ns.data_copy(a.get(ns.float16), x, 4096)
        if flag:
            ns.set_flag(H.MTE2_V, 0)
            ns.wait_flag(H.MTE2_V, 0)
        ns.duplicate(b.get(ns.float16), 1.0, 4096)

    x = np.zeros(4096, np.float16)
    (cp,), (v,) = (records(ns.launch(k, 1, x, True), pipe=p) for p in (ns.Pipe.MTE2, ns.Pipe.V))
    assert v.start == pytest.approx(cp.end)
    res = ns.launch(k, 1, x, False)  # no flag: the vector op is independent of the copy and runs at once
    v2 = records(res, pipe=ns.Pipe.V)[0]
    assert v2.start < cp.end
    assert res.profile.total_cycles == pytest.approx(cp.end)


def test_pipe_barrier_all_waits_for_every_pipe():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        a, b = ns.TBuf(), ns.TBuf()
        pipe.init_buffer(a, 8192)
        pipe.init_buffer(b, 8192)
        ns.data_copy(a.get(ns.float16), x, 4096)
        ns.pipe_barrier(ns.Pipe.ALL)
        ns.duplicate(b.get(ns.float16), 1.0, 4096)
        ns.pipe_barrier(ns.Pipe.V)  # one pipe orders itself: costs only the issue

    res = ns.launch(k, 1, np.zeros(4096, np.float16))
    cp, v = records(res, pipe=ns.Pipe.MTE2)[0], records(res, pipe=ns.Pipe.V)[0]
    assert v.start >= cp.end
    assert res.profile.total_cycles == pytest.approx(v.end)
    with pytest.raises(ns.UsageError, match="PIPE_S|Pipe.S"):
        ns.launch(lambda: ns.pipe_barrier(ns.Pipe.S), 1)


def test_instruction_queue_depth_stalls_the_scalar_unit():
    @ns.kernel
    def k(x, n_copies):
        pipe = ns.TPipe()
        a, b = ns.TBuf(), ns.TBuf()
        pipe.init_buffer(a, 8192)
        pipe.init_buffer(b, 64)
        for _ in range(n_copies):
            ns.data_copy(a.get(ns.float16), x, 4096)
        ns.duplicate(b.get(ns.float16), 1.0, 16)   # another pipe, independent of the copies

    x = np.zeros(4096, np.float16)
    n = 40
    for depth in (32, 8):
        res = ns.launch(k, 1, x, n, config=CFG.replace(instr_queue_depth=depth), sanitize="off")
        copies, (v,) = records(res, pipe=ns.Pipe.MTE2), records(res, pipe=ns.Pipe.V)
        # the scalar unit issues copy i only once copy i - depth has started: the vector op after the
        # last copy waits for copy n - 1 - depth to start
        assert copies[n - 1 - depth].start <= v.start < copies[n - depth].start
    res = ns.launch(k, 1, x, n, config=CFG.replace(instr_queue_depth=1000), sanitize="off")
    assert records(res, pipe=ns.Pipe.V)[0].start <= (n + 1) * ISSUE  # no stall: issued right away


# ---------------------------------------------------------------------------------------------------------
# double buffering
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def stream(x, y, tile, n_tiles, bufs):
    """CopyIn (MTE2) -> exp (V) -> CopyOut (MTE3), ``bufs`` buffers per queue."""
    pipe = ns.TPipe()
    q_in, q_out = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECOUT)
    pipe.init_buffer(q_in, bufs, tile * 2)
    pipe.init_buffer(q_out, bufs, tile * 2)
    for i in range(n_tiles):
        t = q_in.alloc_tensor(ns.float16)
        ns.data_copy(t, x[i * tile:], tile)
        q_in.enque(t)
        t = q_in.deque()
        o = q_out.alloc_tensor(ns.float16)
        ns.exp(o, t, tile)
        q_out.enque(o)
        q_in.free_tensor(t)
        o = q_out.deque()
        ns.data_copy(y[i * tile:], o, tile)
        q_out.free_tensor(o)


@pytest.mark.parametrize("tile,n_tiles", [(2048, 16), (1024, 24), (4096, 8)])
def test_double_buffering_speedup_matches_the_stage_costs(tile, n_tiles):
    x = np.zeros(tile * n_tiles, np.float16)
    y = np.zeros_like(x)
    rate = CFG.gm_rate(1)
    # per-stage costs; every tile starts 512 B aligned in GM
    c_in = c_out = hand_gm(CFG, [(0, tile * 2)], rate)
    c_v = hand_vector(CFG, tile, 2, complex_op=True)
    bottleneck = max(c_in, c_v, c_out)
    # one buffer: tile i+1 is read while tile i is written out, but the compute waits for both
    single = c_in + n_tiles * c_v + (n_tiles - 1) * max(c_in, c_out) + c_out
    # two buffers: a pipeline whose slowest stage sets the pace
    double = c_in + c_v + c_out + (n_tiles - 1) * bottleneck
    t1 = ns.launch(stream, 1, x, y, tile, n_tiles, 1).profile.total_cycles
    t2 = ns.launch(stream, 1, x, y, tile, n_tiles, 2).profile.total_cycles
    assert t1 == pytest.approx(single, rel=0.01)
    assert t2 == pytest.approx(double, rel=0.01)
    assert t1 / t2 == pytest.approx(single / double, rel=0.02)
    assert t1 / t2 > 1.5  # the stages are balanced: close to the ideal 2x


# ---------------------------------------------------------------------------------------------------------
# blocks, waves and GM sharing
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def per_block_copy(x, y, n, addrs):
    b = ns.get_block_idx()
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
    pipe.init_buffer(q, 1, n * 2)
    t = q.alloc_tensor(ns.float16)
    addrs[b] = (x[b * n:].byte_addr(), y[b * n:].byte_addr())
    ns.data_copy(t, x[b * n:], n)
    q.enque(t)
    t = q.deque()
    ns.data_copy(y[b * n:], t, n)
    q.free_tensor(t)


@pytest.mark.parametrize("block_dim", [3, 5, 8])
def test_block_dim_above_num_cores_runs_in_waves(block_dim):
    cfg = CFG.replace(name="two-cores", num_cores=1)   # one AI core: two Vector cores for this vector kernel
    n = 2048
    x = np.arange(n * block_dim, dtype=np.float16)
    y = np.zeros_like(x)
    one_wave = ns.launch(per_block_copy, 2, x, y, n, {}, config=cfg).profile
    res = ns.launch(per_block_copy, block_dim, x, y, n, {}, config=cfg)
    np.testing.assert_array_equal(res["y"], x)
    t = one_wave.total_cycles
    assert one_wave.block_end_cycles == [t, t]
    # block b runs on core b % 2 after that core's previous block
    assert res.profile.block_end_cycles == pytest.approx([(b // 2 + 1) * t for b in range(block_dim)])
    assert res.profile.total_cycles == pytest.approx(math.ceil(block_dim / 2) * t)
    assert res.profile.active_cores == 2
    starts = {}
    for r in records(res):
        starts.setdefault(r.block, r.start)
    for b in range(block_dim):
        assert starts[b] >= (b // 2) * t


@pytest.mark.parametrize("block_dim", [1, 2, 6, 12, 16, 24, 25, 48])
def test_cores_share_one_hbm_for_reads_and_writes(block_dim):
    n = 4096
    x = np.zeros(n * block_dim, np.float16)
    addrs = {}
    res = ns.launch(per_block_copy, block_dim, x, np.zeros_like(x), n, addrs)
    p = res.profile
    active = min(block_dim, CFG.vector_cores)   # a vector kernel: up to 48 AIV at once
    assert p.active_cores == active
    port, chip = CFG.gm_port_bytes_per_cycle, CFG.chip_gm_bytes_per_cycle
    # a cold L2 and distinct lines: every byte read and every byte written crosses HBM once
    assert p.hbm_read_bytes == p.hbm_write_bytes == block_dim * n * 2
    assert p.l2_hit_bytes == 0 and p.l2_hit_rate == 0
    # one HBM for the chip, reads and writes together: never faster than that (to one budget window)
    assert p.total_cycles >= p.hbm_bytes / chip - WINDOW
    if active * port <= chip:
        # each block reads, then writes: the cores cannot oversubscribe HBM, every copy runs at its port rate
        for r in records(res, "data_copy"):
            addr = addrs[r.block][0 if r.pipe == ns.Pipe.MTE2 else 1]
            assert r.end - r.start == pytest.approx(hand_gm(CFG, [(addr, n * 2)], port))
    else:
        # oversubscribed: the HBM serves the cores first come, first served (in simulated time), and no
        # window of it is left unused while cores wait
        alone = hand_gm(CFG, [(addrs[0][0], n * 2)], port)
        assert p.total_cycles <= p.hbm_bytes / chip + 2 * alone
        assert max(r.end - r.start for r in records(res, "data_copy")) > alone  # someone waited
    # waves: a block starts when the previous block on its core has ended
    ends = p.block_end_cycles
    for b in range(active, block_dim):
        assert p.block_start_cycles[b] == ends[b - active]
