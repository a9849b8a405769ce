"""Every Profile metric on launches small enough to work out by hand."""

import numpy as np
import pytest

import npusim as ns
from npusim.memsys import WINDOW
from npusim import formats
from npusim.profile import metric_docs

from core_helpers import records

pytestmark = pytest.mark.core

H = ns.HardEvent
CFG = ns.a2
ISSUE = CFG.scalar_issue_cycles


@ns.kernel
def vadd(x, y, z, n, extra_adds=0):
    """One tile of z = x + y through queues (n fp16 elements per block), plus ``extra_adds`` more adds."""
    b = ns.get_block_idx()
    x, y, z = x[b * n:], y[b * n:], z[b * n:]
    pipe = ns.TPipe()
    qx, qy, qz = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECOUT)
    for q in (qx, qy, qz):
        pipe.init_buffer(q, 1, n * 2)
    xl, yl = qx.alloc_tensor(ns.float16), qy.alloc_tensor(ns.float16)
    ns.data_copy(xl, x, n)
    ns.data_copy(yl, y, n)
    qx.enque(xl)
    qy.enque(yl)
    xl, yl = qx.deque(), qy.deque()
    zl = qz.alloc_tensor(ns.float16)
    ns.add(zl, xl, yl, n)
    for _ in range(extra_adds):
        ns.add(zl, zl, yl, n)
    qz.enque(zl)
    qx.free_tensor(xl)
    qy.free_tensor(yl)
    zl = qz.deque()
    ns.data_copy(z, zl, n)
    qz.free_tensor(zl)


def _vadd(n=256, block_dim=1, extra_adds=0):
    x = np.ones(n * block_dim, np.float16)
    return ns.launch(vadd, block_dim, x, x.copy(), np.zeros_like(x), n, extra_adds).profile


def test_vector_kernel_profile_by_hand():
    n = 256                                   # 512 B per tensor, every GM address 512 B aligned
    p = _vadd(n)
    copy = CFG.gm_startup_cycles + CFG.gm_burst_overhead_cycles + 512 / 64   # 73 cycles
    add = CFG.vector_startup_cycles + 512 / 256                               # 6 cycles
    assert copy == 73 and add == 6
    # the critical path: copy x, copy y (same pipe), add, copy z; the first copy waits for two allocs
    first = records_first_start(p)
    assert first in (2 * ISSUE, 3 * ISSUE)
    assert p.total_cycles == pytest.approx(first + 3 * copy + add)
    assert p.time_us == pytest.approx(p.total_cycles / (1.8 * 1000))
    # busy cycles and ratios
    assert p.pipe_busy_cycles["mte2"] == 2 * copy
    assert p.pipe_busy_cycles["mte3"] == copy
    assert p.pipe_busy_cycles["vec"] == add
    assert p.pipe_busy_cycles["cube"] == p.pipe_busy_cycles["mte1"] == p.pipe_busy_cycles["fixp"] == 0
    assert p.pipe_busy_cycles["scalar"] == 16 * ISSUE  # 4 allocs, 3 copies, 3 enques, 3 deques, 3 frees + add
    for pipe, busy in p.pipe_busy_cycles.items():
        assert p.pipe_ratio[pipe] == pytest.approx(busy / p.total_cycles)
    assert p.critical_pipe == "mte2"
    # work and bytes
    assert p.path_bytes == {"GM->UB": 1024, "UB->GM": 512}
    assert p.gm_bytes == 1536
    assert p.reserved_bytes == {"UB": 3 * 512}  # three 512 B queue buffers
    assert p.vector_ops == n and p.cube_macs == 0
    assert p.flops == n
    assert p.arithmetic_intensity == pytest.approx(256 / 1536)
    assert p.mac_utilization == 0
    # roofline: vector ideal = 512 B / 256 B per cycle; GM: the busier DMA pipe (MTE2) at 64 B/cycle
    assert p.vector_ideal_cycles == 2
    assert p.compute_bound_cycles == 2
    assert p.memory_bound_cycles == pytest.approx(1024 / 64)
    assert p.roofline_cycles == pytest.approx(16)
    assert p.roofline_efficiency == pytest.approx(16 / p.total_cycles)
    assert p.peak_flops == pytest.approx(128 * 1.8e9)
    assert p.peak_gm_bytes_per_s == pytest.approx(64 * 1.8e9)
    assert p.bound == "memory"   # 1/6 FLOP/B is below the ridge point of 2 FLOP/B
    assert p.achieved_flops == pytest.approx(n / (p.total_cycles / 1.8e9))
    # bandwidth per path: bytes / time against the port peak
    secs = p.total_cycles / 1.8e9
    bw = p.bandwidth
    assert bw["GM->UB"]["bytes"] == 1024
    assert bw["GM->UB"]["achieved_gbps"] == pytest.approx(1024 / secs / 1e9)
    assert bw["GM->UB"]["peak_gbps"] == pytest.approx(64 * 1.8)
    assert bw["GM->UB"]["efficiency"] == pytest.approx(1024 / secs / 1e9 / (64 * 1.8))
    assert bw["UB->GM"]["achieved_gbps"] == pytest.approx(512 / secs / 1e9)


def records_first_start(profile):
    return min(r[2] for r in profile.raw_records if r[1] == int(ns.Pipe.MTE2))


def test_compute_bound_vector_kernel():
    # 40 adds of 256 fp16 = 10240 FLOP over 1536 B of GM: 6.7 FLOP/B, above the ridge of 2
    p = _vadd(256, extra_adds=39)
    assert p.vector_ops == 40 * 256
    assert p.arithmetic_intensity == pytest.approx(40 * 256 / 1536)
    assert p.bound == "compute"
    assert p.vector_ideal_cycles == pytest.approx(40 * 2)
    assert p.compute_bound_cycles == pytest.approx(80)
    assert p.memory_bound_cycles == pytest.approx(16)
    assert p.roofline_cycles == pytest.approx(80)
    assert p.critical_pipe == "vec"
    assert p.pipe_busy_cycles["vec"] == 40 * (CFG.vector_startup_cycles + 2)


@pytest.mark.parametrize("block_dim", [2, 12, 24, 30, 50])
def test_multi_core_peaks_use_the_shared_gm_rate(block_dim):
    p = _vadd(256, block_dim)
    n = min(block_dim, CFG.vector_cores)   # a vector kernel runs on up to 48 AIV
    assert p.active_cores == n
    rate = CFG.gm_rate(n)
    port, chip = CFG.gm_port_bytes_per_cycle, CFG.chip_gm_bytes_per_cycle
    assert p.l2_hit_rate == 0  # every line is read once: the reads' peak is the cores' ports
    assert p.path_peak_bytes_per_cycle("GM->UB") == pytest.approx(port * n)
    assert p.path_peak_bytes_per_cycle("UB->GM") == pytest.approx(rate * n)  # capped by the one HBM
    assert p.path_peak_bytes_per_cycle("HBM") == pytest.approx(chip)
    assert p.path_peak_bytes_per_cycle("L1->L0A") == pytest.approx(CFG.l1_to_l0a_bytes_per_cycle * n)
    assert p.peak_gm_bytes_per_s == pytest.approx(rate * n * 1.8e9)
    assert p.peak_flops == pytest.approx(128 * 1.8e9 * n)
    assert p.path_bytes["GM->UB"] == 1024 * block_dim
    assert p.hbm_bytes == 1024 * block_dim + p.path_bytes["UB->GM"]
    assert p.memory_bound_cycles == pytest.approx(max(1024 * block_dim / (n * port),
                                                      p.hbm_bytes / chip - WINDOW))
    assert p.compute_bound_cycles == pytest.approx(2 * block_dim / n)
    busy = p.pipe_busy_cycles["mte2"]
    assert p.pipe_ratio["mte2"] == pytest.approx(busy / (n * p.total_cycles))
    bw = p.bandwidth["GM->UB"]
    assert bw["peak_gbps"] == pytest.approx(port * n * 1.8)
    assert bw["efficiency"] == pytest.approx(bw["achieved_gbps"] / bw["peak_gbps"])


@ns.kernel
def one_mmad(a_zz, b_zn, c, m, n, k):
    pipe = ns.TPipe()
    a1, b1, a2, b2 = (ns.TBuf(pos) for pos in (ns.TPosition.A1, ns.TPosition.B1, ns.TPosition.A2, ns.TPosition.B2))
    co1 = ns.TQue(ns.TPosition.CO1)
    for buf, t in ((a1, a_zz), (b1, b_zn), (a2, a_zz), (b2, b_zn)):
        pipe.init_buffer(buf, t.size * 2)
    pipe.init_buffer(co1, 1, -(-m // 16) * -(-n // 16) * 1024)
    ns.data_copy(a1.get(ns.float16), a_zz, a_zz.size)
    ns.data_copy(b1.get(ns.float16), b_zn, b_zn.size)
    ns.set_flag(H.MTE2_MTE1, 0)
    ns.wait_flag(H.MTE2_MTE1, 0)
    ns.load_data(a2.get(ns.float16), a1.get(ns.float16), ns.LoadData2DParams(repeat_times=a_zz.size // 256))
    ns.load_data(b2.get(ns.float16), b1.get(ns.float16), ns.LoadData2DParams(repeat_times=b_zn.size // 256))
    ns.set_flag(H.MTE1_M, 0)
    ns.wait_flag(H.MTE1_M, 0)
    acc = co1.alloc_tensor(ns.float32)
    ns.mmad(acc, a2.get(ns.float16), b2.get(ns.float16), m=m, n=n, k=k)
    co1.enque(acc)
    acc = co1.deque()
    ns.fixpipe(c, acc, ns.FixpipeParams(m, n))
    co1.free_tensor(acc)


@pytest.mark.parametrize("m,n,k", [(16, 16, 16), (20, 16, 16), (64, 48, 40)])
def test_cube_kernel_profile_by_hand(m, n, k):
    a = np.ones((m, k), np.float16)
    b = np.ones((k, n), np.float16)
    za, zb = formats.nd_to_zz(a).reshape(-1), formats.nd_to_zn(b).reshape(-1)
    res = ns.launch(one_mmad, 1, za, zb, np.zeros((m, n), np.float32), m, n, k)
    np.testing.assert_array_equal(res["c"], np.full((m, n), k, np.float32))
    p = res.profile
    macs = m * n * k
    assert p.cube_macs == macs
    assert p.cube_dtype == "float16"
    assert p.cube_ideal_cycles == pytest.approx(macs / 4096)
    assert p.mac_utilization == pytest.approx(macs / 4096 / p.total_cycles)
    assert p.flops == 2 * macs
    m16, n16, k16 = (-(-v // 16) * 16 for v in (m, n, k))
    gm = {"GM->L1": (m16 * k16 + k16 * n16) * 2, "L0C->GM": m * n * 4}
    assert {k_: v for k_, v in p.path_bytes.items() if "GM" in k_} == gm
    assert p.path_bytes["L1->L0A"] == m16 * k16 * 2 and p.path_bytes["L1->L0B"] == k16 * n16 * 2
    assert p.gm_bytes == sum(gm.values())
    assert p.arithmetic_intensity == pytest.approx(2 * macs / sum(gm.values()))
    assert p.peak_flops == pytest.approx(2 * 4096 * 1.8e9)
    assert p.compute_bound_cycles == pytest.approx(macs / 4096)
    # MTE2 and FIX are separate DMA pipes: the busier one bounds the time
    assert p.memory_bound_cycles == pytest.approx(max(gm.values()) / 64)
    ridge = 2 * 4096 / 64
    assert p.bound == ("compute" if p.arithmetic_intensity >= ridge else "memory") == "memory"
    cube = records(res, "mmad")[0]
    assert cube.end - cube.start == pytest.approx(CFG.cube_startup_cycles + m16 * n16 * k16 / 4096)
    assert p.pipe_busy_cycles["cube"] == pytest.approx(cube.end - cube.start)
    assert p.critical_pipe in ("mte2", "fixp")


def test_compute_bound_cube_kernel():
    m = n = k = 128
    a = np.ones((m, k), np.float16)
    za, zb = formats.nd_to_zz(a).reshape(-1), formats.nd_to_zn(a).reshape(-1)
    # 2*128^3 FLOP over 2*32 KB + 64 KB of GM = 64 FLOP/B: below the ridge of 128 -> memory
    p = ns.launch(one_mmad, 1, za, zb, np.zeros((m, n), np.float32), m, n, k).profile
    assert p.arithmetic_intensity == pytest.approx(2 * 128 ** 3 / (2 * 32768 + 65536))
    assert p.bound == "memory"
    # the same work on a config with a much slower Cube is compute bound
    slow = CFG.replace(name="slow-cube", cube_macs_per_cycle={"float16": 16, "bfloat16": 16, "int8": 32,
                                                              "float32": 4})
    p2 = ns.launch(one_mmad, 1, za, zb, np.zeros((m, n), np.float32), m, n, k, config=slow).profile
    assert p2.bound == "compute"
    assert p2.compute_bound_cycles == pytest.approx(128 ** 3 / 16)
    assert p2.compute_bound_cycles > p2.memory_bound_cycles
    assert p2.critical_pipe == "cube"


def test_an_empty_kernel_has_a_sane_profile():
    p = ns.launch(lambda: None, 1).profile
    assert p.total_cycles == 0
    assert p.gm_bytes == 0 and p.flops == 0
    assert p.arithmetic_intensity == float("inf")
    assert p.memory_bound_cycles == 0 and p.compute_bound_cycles == 0
    assert p.roofline_efficiency == 0 and p.achieved_flops == 0
    assert p.critical_pipe == "scalar"
    assert all(v == 0 for v in p.pipe_ratio.values())


def test_metrics_summary_and_docs():
    p = _vadd(256)
    m = p.metrics()
    assert m["total_cycles"] == p.total_cycles and m["instructions"] == p.instruction_count == 4
    assert m["mte2_ratio"] == p.pipe_ratio["mte2"]
    assert m["roofline_efficiency"] == p.roofline_efficiency
    text = p.summary()
    assert "memory" in text and "mte2" in text and "GM->UB" in text
    assert str(p) == text
    assert "<table" in p._repr_html_()
    docs = metric_docs()
    for name in ("pipe_ratio", "mac_utilization", "bandwidth", "arithmetic_intensity", "bound",
                 "compute_bound_cycles", "memory_bound_cycles", "flops", "roofline_cycles"):
        assert name in docs and docs[name]
    assert [r.start for r in p.instructions] == sorted(r.start for r in p.instructions)
    ops = [r.op for r in p.instructions if r.pipe != ns.Pipe.S]
    assert sorted(ops) == ["add", "data_copy", "data_copy", "data_copy"]
