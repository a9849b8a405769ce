"""Public multi-core Ascend C kernels, transliterated call by call (Python names, same tiling), run on a2.

Sources (cannmirror/asc-devkit, a mirror of gitcode cann/asc-devkit, read with the course's search tool):

- ``examples/02_features/11_synchronous_control/sync_all/sync_all.asc``: 8 AIV blocks double their slice,
  store it in a GM workspace, SyncAll (software form), then each adds every other block's slice.
- ``examples/02_features/13_atomic_operations/set_atomic_add/set_atomic_add.asc``: 3 blocks each
  SetAtomicAdd<float> the same 256 floats into one output.
- ``examples/02_features/11_synchronous_control/init_determine_compute_workspace/
  init_determine_compute_workspace.asc``: 8 blocks add the same source tile by tile in block order
  (WaitPreBlock / NotifyNextBlock) with atomics. As published it copies GM -> UB -> GM with no queue call
  or flag between the two DMAs: npusim reports that RAW race (MTE3 may read UB before MTE2 has written it);
  the test keeps the message, and the sample's result with ``sanitize="warn"``.
- ``docs/api/context/CrossCoreSetFlag(ISASI).md`` (its example): a MIX kernel in which the AIC signals
  with ``CrossCoreSetFlag<0x2, PIPE_FIX>`` after its matmul and each AIV waits with CrossCoreWaitFlag
  before its vector post-processing. The doc gives only the synchronisation; the matmul (one tile) and
  the post-processing (ReLU of each AIV's half of the rows) around it are ours.
"""

import numpy as np
import pytest

import npusim as ns
from npusim.cores import infer_kernel_type
from npusim.kernels.matmul import copy_strips

pytestmark = pytest.mark.core

DEFAULT_SYNCALL_NEED_SIZE = 8


# --- sync_all.asc ------------------------------------------------------------------------------------
class KernelSyncAll:
    def init(self, src_gm, dst_gm, work_gm, sync_gm, pipe):
        self.pipe = pipe
        self.src_data_size = 256
        self.block_num = ns.get_block_num()
        self.per_block_size = self.src_data_size // self.block_num
        self.block_idx = ns.get_block_idx()
        self.src_global = src_gm[self.block_idx * self.per_block_size:]
        self.dst_global = dst_gm[self.block_idx * self.per_block_size:]
        self.work_global = work_gm
        self.sync_global = sync_gm
        self.in_queue_src1 = ns.TQue(ns.TPosition.VECIN, 1)
        self.in_queue_src2 = ns.TQue(ns.TPosition.VECIN, 1)
        self.work_queue = ns.TQue(ns.TPosition.VECIN, 1)
        self.out_queue_dst = ns.TQue(ns.TPosition.VECOUT, 1)
        pipe.init_buffer(self.in_queue_src1, 1, self.per_block_size * 4)
        pipe.init_buffer(self.in_queue_src2, 1, self.per_block_size * 4)
        pipe.init_buffer(self.work_queue, 1, self.block_num * DEFAULT_SYNCALL_NEED_SIZE * 4)
        pipe.init_buffer(self.out_queue_dst, 1, self.per_block_size * 4)

    def process(self):
        self.copy_in()
        self.first_compute()
        self.copy_to_work_global()
        work_local = self.work_queue.alloc_tensor(ns.int32)
        ns.sync_all(self.sync_global, work_local)
        self.work_queue.free_tensor(work_local)
        src_local2 = self.in_queue_src2.deque()
        dst_local = self.out_queue_dst.alloc_tensor(ns.float32)
        ns.data_copy(dst_local, src_local2, self.per_block_size)
        self.in_queue_src2.free_tensor(src_local2)
        for i in range(self.block_num):
            if i != self.block_idx:
                self.copy_from_other_core(i)
                self.accumulate(dst_local)
        self.out_queue_dst.enque(dst_local)
        self.copy_out()

    def copy_to_work_global(self):
        dst_local = self.out_queue_dst.deque()
        ns.data_copy(self.work_global[self.block_idx * self.per_block_size:], dst_local, self.per_block_size)
        self.out_queue_dst.free_tensor(dst_local)

    def copy_from_other_core(self, index):
        src_local = self.in_queue_src1.alloc_tensor(ns.float32)
        ns.data_copy(src_local, self.work_global[index * self.per_block_size:], self.per_block_size)
        self.in_queue_src1.enque(src_local)

    def accumulate(self, dst_local):
        src_local1 = self.in_queue_src1.deque()
        ns.add(dst_local, dst_local, src_local1, self.per_block_size)
        self.in_queue_src1.free_tensor(src_local1)

    def copy_in(self):
        src_local = self.in_queue_src1.alloc_tensor(ns.float32)
        ns.data_copy(src_local, self.src_global, self.per_block_size)
        self.in_queue_src1.enque(src_local)

    def first_compute(self):
        src_local1 = self.in_queue_src1.deque()
        src_local2 = self.in_queue_src2.alloc_tensor(ns.float32)
        dst_local = self.out_queue_dst.alloc_tensor(ns.float32)
        scalar_value = 2.0
        ns.muls(dst_local, src_local1, scalar_value, self.per_block_size)
        ns.pipe_barrier(ns.Pipe.V)
        ns.data_copy(src_local2, dst_local, self.per_block_size)
        self.in_queue_src1.free_tensor(src_local1)
        self.in_queue_src2.enque(src_local2)
        self.out_queue_dst.enque(dst_local)

    def copy_out(self):
        dst_local = self.out_queue_dst.deque()
        ns.data_copy(self.dst_global, dst_local, self.per_block_size)
        self.out_queue_dst.free_tensor(dst_local)


@ns.kernel
def sync_all_custom(src_gm, dst_gm, work_gm, sync_gm):
    pipe = ns.TPipe()
    op = KernelSyncAll()
    op.init(src_gm, dst_gm, work_gm, sync_gm, pipe)
    op.process()


def test_sync_all_sample_matches_numpy_in_one_wave():
    x = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    z = np.zeros(256, np.float32)
    work = np.zeros(256, np.float32)
    sync = np.zeros(8 * DEFAULT_SYNCALL_NEED_SIZE, np.int32)
    r = ns.launch(sync_all_custom, 8, x, z, work, sync, kernel_type="aiv_only")
    want = np.tile((2 * x).reshape(8, 32).sum(0), 8)
    np.testing.assert_allclose(z, want, rtol=1e-5)
    p = r.profile
    assert p.kernel_type == "aiv_only" and p.active_cores == 8
    # every block waits at the barrier: one release time for all
    syncs = [next(r for r in recs if r[3] == "sync_all") for recs in p.block_records]
    assert len({s[2] for s in syncs}) == 1   # one release time for all


def test_sync_all_sample_without_the_barrier_is_a_race_between_cores(monkeypatch):
    monkeypatch.setattr(ns, "sync_all", lambda *a, **k: None)
    x = np.ones(256, np.float32)
    z, work = np.zeros(256, np.float32), np.zeros(256, np.float32)
    with pytest.raises(ns.RaceError, match="between cores in GM 'work_gm'") as e:
        ns.launch(sync_all_custom, 8, x, z, work, np.zeros(64, np.int32))
    assert "sync_all()" in e.value.hint


@ns.kernel
def barrier_only(x):
    if ns.get_block_idx() % 2 == 0 or x.shape[0] > 1:
        ns.sync_all()


def test_sync_all_beyond_the_vector_cores_or_skipped_by_some_is_a_hang():
    with pytest.raises(ns.SyncError, match="only 48 run at once"):
        ns.launch(barrier_only, 60, np.zeros(2, np.float32))
    with pytest.raises(ns.SyncError, match=r"every remaining core waits.*aiv\(0\): sync_all\(\)"):
        ns.launch(barrier_only, 4, np.zeros(1, np.float32))


# --- set_atomic_add.asc ------------------------------------------------------------------------------------
class KernelSetAtomicAdd:
    def init(self, src0_gm, dst_gm, pipe):
        self.pipe = pipe
        self.src0_global, self.dst_global = src0_gm, dst_gm
        self.in_queue_src0 = ns.TQue(ns.TPosition.VECIN, 1)
        self.out_queue_dst = ns.TQue(ns.TPosition.VECOUT, 1)
        pipe.init_buffer(self.in_queue_src0, 1, 256 * 4)
        pipe.init_buffer(self.out_queue_dst, 1, 256 * 4)

    def process(self):
        self.copy_out()

    def copy_out(self):
        src0_local = self.in_queue_src0.alloc_tensor(ns.float32)
        ns.set_atomic_none()
        ns.data_copy(src0_local, self.src0_global, 256)
        ns.set_flag(ns.HardEvent.MTE2_MTE3, 0)
        ns.wait_flag(ns.HardEvent.MTE2_MTE3, 0)
        ns.set_atomic_add(ns.float32)
        ns.data_copy(self.dst_global, src0_local, 256)
        ns.set_atomic_none()
        self.in_queue_src0.free_tensor(src0_local)


@ns.kernel
def set_atomic_add_custom(x, z):
    pipe = ns.TPipe()
    op = KernelSetAtomicAdd()
    op.init(x, z, pipe)
    op.process()


def test_set_atomic_add_sample_sums_the_blocks():
    x = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    z = np.zeros(256, np.float32)
    r = ns.launch(set_atomic_add_custom, 3, x, z)
    np.testing.assert_allclose(z, 3 * x, rtol=1e-6)
    assert r.profile.kernel_type == "aiv_only"


def test_plain_writes_of_the_same_bytes_race_and_the_hint_names_atomics():
    @ns.kernel
    def plain(x, z):
        pipe = ns.TPipe()
        q = ns.TQue(ns.TPosition.VECIN, 1)
        pipe.init_buffer(q, 1, 1024)
        t = q.alloc_tensor(ns.float32)
        ns.data_copy(t, x, 256)
        ns.set_flag(ns.HardEvent.MTE2_MTE3, 0)
        ns.wait_flag(ns.HardEvent.MTE2_MTE3, 0)
        ns.data_copy(z, t, 256)
        q.free_tensor(t)

    with pytest.raises(ns.RaceError, match="WAW hazard between cores") as e:
        ns.launch(plain, 3, np.ones(256, np.float32), np.zeros(256, np.float32))
    assert "set_atomic_add" in e.value.hint


def test_atomic_add_of_the_wrong_dtype_is_refused():
    x = np.ones(256, np.float16)

    @ns.kernel
    def wrong(x, z):
        pipe = ns.TPipe()
        q = ns.TQue(ns.TPosition.VECIN, 1)
        pipe.init_buffer(q, 1, 512)
        t = q.alloc_tensor(ns.float16)
        ns.data_copy(t, x, 256)
        ns.set_flag(ns.HardEvent.MTE2_MTE3, 0)
        ns.wait_flag(ns.HardEvent.MTE2_MTE3, 0)
        ns.set_atomic_add(ns.float32)
        ns.data_copy(z, t, 256)
        q.free_tensor(t)

    with pytest.raises(ns.DtypeError, match=r"set_atomic_add\(float32\) is on, but this GM write is float16"):
        ns.launch(wrong, 1, x, np.zeros(256, np.float16))


# --- init_determine_compute_workspace.asc ---------------------------------------------------------------
DATA_SIZE, WORKSPACE_SIZE, TILE_NUM = 256, 8, 2


class SyncTest:
    def init(self, dst_gm, src_gm, work_gm, pipe):
        self.pipe = pipe
        self.element_count = DATA_SIZE
        self.tile_num = TILE_NUM
        self.tile_count = self.element_count // self.tile_num
        self.dst_global, self.src_global, self.gm_workspace = dst_gm, src_gm, work_gm
        self.que = ns.TQue(ns.TPosition.VECIN, 1)
        self.que_tmp = ns.TQue(ns.TPosition.VECIN, 1)
        pipe.init_buffer(self.que, 1, self.element_count * 4)
        pipe.init_buffer(self.que_tmp, 1, WORKSPACE_SIZE * 4)

    def process(self):
        ub_workspace = self.que_tmp.alloc_tensor(ns.int32)
        ns.init_determine_compute_workspace(self.gm_workspace, ub_workspace)
        for i in range(self.tile_num):
            src_local = self.que.alloc_tensor(ns.float32)
            ns.data_copy(src_local, self.src_global[i * self.tile_count:], self.tile_count)
            ns.wait_pre_block(self.gm_workspace, ub_workspace)
            ns.set_atomic_add(ns.float32)
            ns.data_copy(self.dst_global[i * self.tile_count:], src_local, self.tile_count)
            ns.set_atomic_none()
            ns.notify_next_block(self.gm_workspace, ub_workspace)
            self.que.free_tensor(src_local)
        self.que_tmp.free_tensor(ub_workspace)


@ns.kernel
def kernel_init_determine_compute_workspace(x, z, workspace):
    pipe = ns.TPipe()
    op = SyncTest()
    op.init(z, x, workspace, pipe)
    op.process()


def _determine_args():
    x = np.random.default_rng(2).standard_normal(DATA_SIZE).astype(np.float32)
    return x, np.zeros(DATA_SIZE, np.float32), np.zeros(WORKSPACE_SIZE, np.int32)


def test_determine_compute_sample_copies_out_before_its_load_is_done():
    x, z, work = _determine_args()
    with pytest.raises(ns.RaceError, match="RAW hazard in UB") as e:
        ns.launch(kernel_init_determine_compute_workspace, 8, x, z, work)
    assert "PIPE_MTE3 read" in str(e.value) and "PIPE_MTE2 write" in str(e.value)


def test_determine_compute_sample_adds_in_block_order():
    x, z, work = _determine_args()
    with pytest.warns(ns.SanitizerWarning):
        r = ns.launch(kernel_init_determine_compute_workspace, 8, x, z, work, sanitize="warn")
    np.testing.assert_allclose(z, 8 * x, rtol=1e-5)
    # the atomic copies of tile 0 run block after block: each starts after the previous block's notify
    firsts = []
    for recs in r.profile.block_records:
        firsts.append(min(s for p, s, e, op, *_ in recs if op.startswith("data_copy") and p == 5))
    assert firsts == sorted(firsts) and len(set(firsts)) == 8


# --- CrossCoreSetFlag doc example: a MIX kernel --------------------------------------------------------
M = N = K = 32


@ns.kernel
def matmul_then_relu(a, b, work, y):
    pipe = ns.TPipe()
    if ns.ascend_is_aic():   # AIC: the matmul of one tile into the GM workspace, then notify the AIVs
        q_a1, q_b1 = ns.TQue(ns.TPosition.A1), ns.TQue(ns.TPosition.B1)
        q_a2, q_b2 = ns.TQue(ns.TPosition.A2), ns.TQue(ns.TPosition.B2)
        q_c = ns.TQue(ns.TPosition.CO1)
        for q, nbytes in ((q_a1, M * K * 2), (q_b1, K * N * 2), (q_a2, M * K * 2), (q_b2, K * N * 2),
                          (q_c, M * N * 4)):
            pipe.init_buffer(q, 1, nbytes)
        a_l1 = q_a1.alloc_tensor(ns.float16)
        copy_strips(a_l1, a, M, K, K)
        q_a1.enque(a_l1)
        b_l1 = q_b1.alloc_tensor(ns.float16)
        copy_strips(b_l1, b, K, N, N)
        q_b1.enque(b_l1)
        a_l1, b_l1 = q_a1.deque(), q_b1.deque()
        a_l0 = q_a2.alloc_tensor(ns.float16)
        ns.load_data(a_l0, a_l1, ns.LoadData2DParams(repeat_times=(M // 16) * (K // 16)))
        q_a2.enque(a_l0)
        b_l0 = q_b2.alloc_tensor(ns.float16)
        ns.load_data(b_l0, b_l1, ns.LoadData2DParams(repeat_times=(K // 16) * (N // 16), if_transpose=True))
        q_b2.enque(b_l0)
        q_a1.free_tensor(a_l1)
        q_b1.free_tensor(b_l1)
        a_l0, b_l0 = q_a2.deque(), q_b2.deque()
        c = q_c.alloc_tensor(ns.float32)
        ns.mmad(c, a_l0, b_l0, ns.MmadParams(m=M, n=N, k=K, cmatrix_init_val=True))
        q_a2.free_tensor(a_l0)
        q_b2.free_tensor(b_l0)
        q_c.enque(c)
        c = q_c.deque()
        ns.fixpipe(work, c, ns.FixpipeParams(m=M, n=N, dst_stride=N))
        q_c.free_tensor(c)
        ns.cross_core_set_flag(0x2, ns.Pipe.FIX, 0x8)
    if ns.ascend_is_aiv():   # AIV: wait for the AIC, then ReLU this AIV's half of the rows
        ns.cross_core_wait_flag(0x8)
        rows = M // ns.get_sub_block_num()
        off = ns.get_sub_block_idx() * rows * N
        q_in, q_out = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECOUT)
        pipe.init_buffer(q_in, 1, rows * N * 4)
        pipe.init_buffer(q_out, 1, rows * N * 4)
        t = q_in.alloc_tensor(ns.float32)
        ns.data_copy(t, work[off:], rows * N)
        q_in.enque(t)
        t = q_in.deque()
        o = q_out.alloc_tensor(ns.float32)
        ns.relu(o, t, rows * N)
        q_in.free_tensor(t)
        q_out.enque(o)
        o = q_out.deque()
        ns.data_copy(y[off:], o, rows * N)
        q_out.free_tensor(o)


def _mix_args():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, np.zeros(M * N, np.float32), np.zeros(M * N, np.float32)


def test_mix_kernel_runs_an_aic_and_two_aivs_per_block():
    a, b, work, y = _mix_args()
    r = ns.launch(matmul_then_relu, 1, a, b, work, y, kernel_type="mix_aic_1_2")
    want = np.maximum(a.astype(np.float32) @ b.astype(np.float32), 0)
    np.testing.assert_allclose(y.reshape(M, N), want, rtol=1e-3, atol=1e-3)
    p = r.profile
    assert p.kernel_type == "mix_aic_1_2" and len(p.block_records) == 3 and p.cube_cores == 1
    fix_end = max(e for pipe, s, e, op, *_ in p.block_records[0] if op == "fixpipe")
    for aiv in p.block_records[1:]:   # each AIV's first load starts after the AIC's fixpipe ended
        assert min(s for pipe, s, e, op, *_ in aiv if op == "data_copy") > fix_end


def test_mix_kernel_without_the_flag_races_on_the_workspace(monkeypatch):
    monkeypatch.setattr(ns, "cross_core_set_flag", lambda *a, **k: None)
    monkeypatch.setattr(ns, "cross_core_wait_flag", lambda *a, **k: None)
    a, b, work, y = _mix_args()
    with pytest.raises(ns.RaceError, match=r"between cores in GM 'work'.*aic\(0\) PIPE_FIX write .* aiv\([01]\) "
                                           r"PIPE_MTE2 read") as e:
        ns.launch(matmul_then_relu, 1, a, b, work, y, kernel_type="mix_aic_1_2")
    assert "cross_core_wait_flag" in e.value.hint


def test_a_wait_nobody_sets_is_a_hang(monkeypatch):
    monkeypatch.setattr(ns, "cross_core_set_flag", lambda *a, **k: None)
    a, b, work, y = _mix_args()
    with pytest.raises(ns.SyncError, match=r"cross_core_wait_flag\(8\).*hangs"):
        ns.launch(matmul_then_relu, 1, a, b, work, y, kernel_type="mix_aic_1_2")


def test_inferred_type_of_a_body_with_both_units_is_coupled_and_an_aiv_has_no_l1():
    assert infer_kernel_type(matmul_then_relu) == "coupled"
    assert infer_kernel_type(set_atomic_add_custom) == "aiv_only"

    @ns.kernel
    def l1_only(x):
        pipe = ns.TPipe()
        pipe.init_buffer(ns.TQue(ns.TPosition.A1), 1, 512)

    assert infer_kernel_type(l1_only) == "aic_only"
    with pytest.raises(ns.UsageError, match=r"L1 is not in a Vector core \(AIV\).*aiv_only \(given to launch\)"):
        ns.launch(l1_only, 1, np.zeros(16, np.float16), kernel_type="aiv_only")
    with pytest.raises(ns.UsageError, match="kernel_type='aiv_only' needs a chip with separate"):
        ns.launch(l1_only, 1, np.zeros(16, np.float16), kernel_type="aiv_only", config="classic")


def test_zeroing_the_output_in_one_block_needs_a_sync_all_before_the_atomic_adds():
    @ns.kernel
    def zero_then_add(x, out, barrier: bool):
        pipe = ns.TPipe()
        q_in, q_out = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT), ns.TQue(ns.TPosition.VECOUT)
        pipe.init_buffer(q_in, 1, 256)
        pipe.init_buffer(q_out, 1, 256)
        if ns.get_block_idx() == 0:
            z = q_out.alloc_tensor(ns.float32)
            ns.duplicate(z, 0.0, 64)
            q_out.enque(z)
            z = q_out.deque()
            ns.data_copy(out, z, 64)
            q_out.free_tensor(z)
        if barrier:
            ns.sync_all()
        t = q_in.alloc_tensor(ns.float32)
        ns.data_copy(t, x[ns.get_block_idx() * 64:], 64)
        q_in.enque(t)
        t = q_in.deque()
        ns.set_atomic_add(ns.float32)
        ns.data_copy(out, t, 64)
        ns.set_atomic_none()
        q_in.free_tensor(t)

    x = np.arange(8 * 64, dtype=np.float32)
    out = np.full(64, 7, np.float32)
    ns.launch(zero_then_add, 8, x, out, True)
    np.testing.assert_allclose(out, x.reshape(8, 64).sum(0))
    with pytest.raises(ns.RaceError, match="WAW hazard between cores") as e:
        ns.launch(zero_then_add, 8, x, out, False)
    assert "an atomic write and a plain access of another core" in e.value.hint


def test_a2_has_24_aic_and_48_aiv_and_classic_is_coupled():
    assert (ns.get_core_num_aic(), ns.get_core_num_aiv()) == (24, 48)
    assert ns.get_core_num_aiv("classic") == ns.classic.num_cores == 32
    seen = []

    @ns.kernel
    def where(x):
        seen.append((ns.get_block_idx(), ns.get_sub_block_idx(), ns.ascend_is_aiv(), ns.get_core_num_aiv()))

    ns.launch(where, 2, np.zeros(1, np.float32), kernel_type="mix_aic_1_2")
    assert seen == [(0, 0, False, 48), (0, 0, True, 48), (1, 1, True, 48),
                    (1, 0, False, 48), (2, 0, True, 48), (3, 1, True, 48)]


@pytest.mark.parametrize("kernel_type,cores", [(None, 48), ("aiv_only", 48), ("coupled", 24)])
def test_a_48_block_vector_kernel_runs_in_one_wave_on_the_aivs(kernel_type, cores):
    x = np.ones(48 * 8, np.float32)
    r = ns.launch(set_atomic_add_custom_slices, 48, x, np.zeros_like(x), kernel_type=kernel_type)
    p = r.profile
    assert p.active_cores == cores
    waves = {s for s in p.block_start_cycles}
    assert len(waves) == (1 if cores == 48 else 2)
    np.testing.assert_array_equal(r["z"], x)


@ns.kernel
def set_atomic_add_custom_slices(x, z):
    """One 8-float slice per block, copied through UB (the copy of set_atomic_add.asc, without atomics)."""
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT, 1)
    pipe.init_buffer(q, 1, 32)
    t = q.alloc_tensor(ns.float32)
    ns.data_copy(t, x[ns.get_block_idx() * 8:], 8)
    q.enque(t)
    t = q.deque()
    ns.data_copy(z[ns.get_block_idx() * 8:], t, 8)
    q.free_tensor(t)


def test_a_position_the_scan_cannot_see_falls_back_to_a_coupled_core_before_gm_is_touched():
    @ns.kernel
    def hidden(x, y):
        pipe = ns.TPipe()
        q = ns.TQueBind(getattr(ns.TPosition, "VEC" + "IN"), getattr(ns.TPosition, "VEC" + "OUT"))
        pipe.init_buffer(q, 1, 64)
        pipe.init_buffer(ns.TQue(getattr(ns.TPosition, "A" + "1")), 1, 512)   # an L1 queue: Cube memory
        t = q.alloc_tensor(ns.float16)
        ns.data_copy(t, x, 32)
        q.enque(t)
        t = q.deque()
        ns.data_copy(y, t, 32)
        q.free_tensor(t)

    assert infer_kernel_type(hidden) == "aiv_only"   # the scan sees no position at all
    x = np.arange(32, dtype=np.float16)
    r = ns.launch(hidden, 1, x, np.zeros_like(x))
    assert r.profile.kernel_type == "coupled"
    np.testing.assert_array_equal(r["y"], x)
