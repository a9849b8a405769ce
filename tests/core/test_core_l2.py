"""The chip's L2 and HBM (npusim.l2, npusim.memsys): hits, misses, waits, write-through, warm launches,
the footprint model against exact LRU, and one HBM for reads and writes."""

import numpy as np
import pytest

import npusim as ns
from npusim.l2 import L2Cache, LruL2Cache, line_span

from core_helpers import hand_gm, records

pytestmark = pytest.mark.core
CFG = ns.a2
LINE = CFG.l2_line_bytes


@ns.kernel
def read(x, n, times=1):
    pipe = ns.TPipe()
    b = ns.TBuf()
    pipe.init_buffer(b, n * 2)
    for _ in range(times):
        ns.data_copy(b.get(ns.float16), x, n)
        ns.pipe_barrier(ns.Pipe.ALL)


@ns.kernel
def copy_out(x, y, n):
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
    pipe.init_buffer(q, 1, n * 2)
    t = q.alloc_tensor(ns.float16)
    ns.data_copy(t, x, n)
    q.enque(t)
    t = q.deque()
    ns.data_copy(y, t, n)
    q.free_tensor(t)


def hit_gm(cfg, nbytes):
    """A contiguous, aligned GM read that finds all its lines in L2 (costs.gm_read_cycles with h = 1)."""
    return cfg.gm_startup_cycles + cfg.gm_burst_overhead_cycles + nbytes / cfg.l2_bytes_per_cycle


def test_a_re_read_hits_l2_and_streams_at_the_l2_rate():
    n = 4096
    x = np.zeros(n, np.float16)
    res = ns.launch(read, 1, x, n, 2)
    first, second = records(res, "data_copy")
    assert first.end - first.start == pytest.approx(hand_gm(CFG, [(0x10000000, 2 * n)], CFG.gm_port_bytes_per_cycle))
    assert second.end - second.start == pytest.approx(hit_gm(CFG, 2 * n))
    p = res.profile
    assert p.l2_hit_bytes == p.l2_miss_bytes == 2 * n and p.l2_hit_rate == 0.5
    assert p.hbm_read_bytes == 2 * n   # the lines came from HBM once
    assert p.bandwidth["L2"]["bytes"] == 2 * n and p.bandwidth["HBM"]["bytes"] == 2 * n


def test_every_launch_starts_cold_unless_a_cache_is_passed_on():
    n = 2048
    x, y = np.arange(n, dtype=np.float16), np.zeros(n, np.float16)
    cold = [ns.launch(copy_out, 1, x, y, n).profile for _ in range(2)]
    assert cold[0].total_cycles == cold[1].total_cycles and cold[1].l2_hit_bytes == 0
    # warm: the second kernel reads what the first wrote (write-through with allocate)
    z = np.zeros(n, np.float16)
    with ns.shared_l2() as l2:
        a = ns.launch(copy_out, 1, x, y, n).profile
        b = ns.launch(copy_out, 1, y, z, n).profile
    assert a.l2_hit_bytes == 0 and b.l2_hit_bytes == 2 * n and b.hbm_read_bytes == 0
    assert b.total_cycles < a.total_cycles
    assert l2.resident_bytes() == 3 * 2 * n   # x, y and z
    np.testing.assert_array_equal(z, x)
    # an explicit cache works the same, outside any shared block
    c = ns.L2Cache()
    ns.launch(copy_out, 1, x, y, n, l2=c)
    assert ns.launch(copy_out, 1, y, z, n, l2=c).profile.l2_hit_bytes == 2 * n


def test_writes_go_through_to_hbm():
    n = 8192
    x, y = np.ones(n, np.float16), np.zeros(n, np.float16)
    p = ns.launch(copy_out, 1, x, y, n).profile
    assert p.hbm_read_bytes == p.hbm_write_bytes == 2 * n and p.hbm_bytes == 4 * n


def test_cores_reading_the_same_lines_at_once_wait_for_one_fetch():
    n = 8192
    x = np.zeros(n, np.float16)
    res = ns.launch(read, 4, x, n)
    p = res.profile
    # simulated one after another but running at the same time: nobody finds the lines ready, every block
    # pays the HBM time, and HBM moves them once
    times = [r.end - r.start for r in records(res, "data_copy")]
    assert times == [pytest.approx(times[0])] * 4
    assert p.l2_hit_bytes == 0 and p.hbm_read_bytes == 2 * n


@ns.kernel
def read_then_reread_late(x, n):
    pipe = ns.TPipe()
    b = ns.TBuf()
    pipe.init_buffer(b, n * 2)
    if ns.get_block_idx() == 1:   # block 1 starts late: block 0's fetch has landed by then
        for _ in range(8):
            ns.data_copy(b.get(ns.float16), x[n:], n)
            ns.pipe_barrier(ns.Pipe.ALL)
    ns.data_copy(b.get(ns.float16), x, n)


def test_a_later_reader_on_another_core_hits():
    n = 4096
    x = np.zeros(2 * n, np.float16)
    p = ns.launch(read_then_reread_late, 2, x, n).profile
    # block 1's 8 reads of x[n:] hit after the first, and so does its late read of block 0's x[:n]
    assert p.l2_hit_bytes == (7 + 1) * 2 * n
    assert p.hbm_read_bytes == 2 * 2 * n


def _lines(sp):
    return list(range(sp.start, sp.stop)) if isinstance(sp, slice) else list(sp)


def test_line_span_of_strided_copies():
    assert line_span(0, 1, 512, 512, LINE) == slice(0, 1)
    assert line_span(100, 1, 512, 512, LINE) == slice(0, 2)
    assert line_span(0, 4, 128, 128, LINE) == slice(0, 1)
    assert _lines(line_span(0, 4, 128, 2048, LINE)) == [0, 4, 8, 12]
    assert _lines(line_span(512 * 3, 4, 128, 2048, LINE)) == [3, 7, 11, 15]
    assert line_span(0, 4, 128, 256, LINE) == slice(0, 2)          # bursts share lines: each once
    assert _lines(line_span(448, 3, 128, 1024, LINE)) == [0, 1, 2, 3, 4, 5]
    assert _lines(line_span(448, 3, 64, 1536, LINE)) == [0, 3, 6]
    assert line_span(0, 0, 64, 64, LINE) == slice(0, 0)


def _replay(cache, accesses):
    """(hits, waits, misses) of a sequence of (key, first line, lines, time, write)."""
    out = [0, 0, 0]
    for key, lo, n, t, write in accesses:
        sl = slice(lo, lo + n)
        if write:
            cache.write(cache.buffer(key, 1 << 16), sl, t)
            continue
        h, w, m, handle = cache.read(cache.buffer(key, 1 << 16), sl, t)
        cache.settle(handle, t + 1)
        out = [out[0] + h, out[1] + w, out[2] + m]
    return out


def test_footprint_model_equals_lru_when_the_working_set_fits():
    rng = np.random.default_rng(1)
    accesses = [((int(rng.integers(3)),), int(rng.integers(0, 2000)), int(rng.integers(1, 40)), float(i * 10),
                 bool(rng.random() < 0.2)) for i in range(400)]
    assert _replay(L2Cache(CFG), accesses) == _replay(LruL2Cache(CFG), accesses)


def test_footprint_model_evicts_after_capacity_new_lines():
    small = CFG.replace(name="a2-tiny-l2", l2_bytes=64 * LINE)
    fp, lru = L2Cache(small), LruL2Cache(small)
    stream = [(("x",), i * 16, 16, float(i), False) for i in range(8)]      # 128 lines through 64
    again = [(("x",), 0, 16, 100.0, False)]
    for c in (fp, lru):
        _replay(c, stream)
        assert _replay(c, again) == [0, 0, 16]    # the first lines are gone in both
    hot = [(("y",), 0, 16, float(i), False) for i in range(10)]
    assert _replay(L2Cache(small), hot) == _replay(LruL2Cache(small), hot) == [144, 0, 16]


def test_a_memory_bound_chip_kernel_is_held_to_one_hbm():
    """Reads and writes share the HBM: 24 cores streaming a copy run at the chip's rate, not 2x it."""
    from npusim.kernels.vector_add import run_vector_add

    n = 24 * 64 * 1024
    x, y = np.ones(n, np.float16), np.ones(n, np.float16)
    p = run_vector_add(x, y, tile=8192, buffer_num=2, block_dim=24).profile
    moved = 3 * n * 2
    assert p.hbm_bytes == moved
    achieved = moved / p.total_cycles
    assert 0.85 * CFG.chip_gm_bytes_per_cycle < achieved <= CFG.chip_gm_bytes_per_cycle * 1.001
    assert p.memory_bound_cycles <= p.total_cycles
