"""One crafted faulty kernel per sanitizer error class: the class, the key facts of the message, the fix,
and what sanitize="warn" and sanitize="off" change."""

import inspect
import os
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import npusim as ns

from core_helpers import FAST

pytestmark = pytest.mark.core

H = ns.HardEvent
HERE = os.path.basename(__file__)


def line_of(fn, marker: str) -> str:
    """``file:line`` of the source line of ``fn`` that carries ``# <marker>``."""
    src, first = inspect.getsourcelines(fn)
    (i,) = [i for i, s in enumerate(src) if s.rstrip().endswith(f"# {marker}")]
    return f"{HERE}:{first + i}"


def x16(n=1024):
    return np.arange(n, dtype=np.float16)


# ---------------------------------------------------------------------------------------------------------
# CapacityError
# ---------------------------------------------------------------------------------------------------------
def test_capacity_error_ub_overflow_lists_what_is_taken():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        q_in, q_out = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECOUT)
        pipe.init_buffer(q_in, 2, 64 * 1024)
        pipe.init_buffer(q_out, 2, 64 * 1024)  # OVERFLOW

    with pytest.raises(ns.CapacityError) as e:
        ns.launch(k, 1, x16())
    msg = str(e.value)
    assert "UB overflow" in msg and "196608 B (192 KB)" in msg
    assert "'q_out'[1] needs 65536 B" in msg
    assert "'q_in'[0] 65536 B" in msg and "'q_in'[1] 65536 B" in msg and "'q_out'[0] 65536 B" in msg
    assert line_of(k, "OVERFLOW") in msg
    assert e.value.facts == {"memory": "UB", "requested": 65536, "capacity": 196608, "used": 196608}
    assert not ns.CapacityError.recoverable
    # the same kernel fits the classic core's 256 KB UB
    ns.launch(k, 1, x16(), config="classic")


@pytest.mark.parametrize("pos,mem,cap", [(ns.TPosition.A1, "L1", 512 * 1024), (ns.TPosition.A2, "L0A", 65536),
                                         (ns.TPosition.B2, "L0B", 65536), (ns.TPosition.CO1, "L0C", 131072)])
def test_capacity_error_in_every_on_chip_memory(pos, mem, cap):
    @ns.kernel
    def k():
        pipe = ns.TPipe()
        pipe.init_buffer(ns.TBuf(pos), cap + 32)

    with pytest.raises(ns.CapacityError, match=f"{mem} overflow in block 0: .* needs {cap + 32} B"):
        ns.launch(k, 1)


def test_capacity_error_too_many_buffers():
    @ns.kernel
    def k():
        pipe = ns.TPipe()
        for i in range(20):
            pipe.init_buffer(ns.TQue(ns.TPosition.VECIN), 3, 32)  # 60 buffers
        pipe.init_buffer(ns.TQue(ns.TPosition.VECOUT), 4, 32)  # 64: still fine
        pipe.init_buffer(ns.TBuf(), 32)  # TOO_MANY

    with pytest.raises(ns.CapacityError) as e:
        ns.launch(k, 1)
    assert "too many buffers" in str(e.value) and "at most 64" in str(e.value) and "would make 65" in str(e.value)
    assert line_of(k, "TOO_MANY") in str(e.value)


def test_capacity_error_tbuf_get_more_than_it_holds():
    @ns.kernel
    def k():
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 64)
        b.get(ns.float32, 17)

    with pytest.raises(ns.CapacityError, match=r"get\(float32, 17\) but it holds only 16 float32 elements"):
        ns.launch(k, 1)


# ---------------------------------------------------------------------------------------------------------
# AlignmentError
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def short_copy(x, y, n):
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
    pipe.init_buffer(q, 1, 2048)
    t = q.alloc_tensor(ns.float16)
    ns.data_copy(t, x, n)  # COPY_IN
    q.enque(t)
    t = q.deque()
    ns.data_copy(y, t, n)  # COPY_OUT
    q.free_tensor(t)


def test_alignment_error_data_copy_length_points_to_data_copy_pad():
    with pytest.raises(ns.AlignmentError) as e:
        ns.launch(short_copy, 1, x16(), np.zeros(1024, np.float16), 40)
    msg = str(e.value)
    assert "data_copy of 40 float16 elements = 80 B, not a multiple of 32 B" in msg
    assert "GM -> UB" in msg and "drops the last 16 B" in msg
    assert "data_copy_pad" in msg and "multiple of 16 elements" in msg
    assert line_of(short_copy, "COPY_IN") in msg
    assert e.value.facts["nbytes"] == 80


def test_alignment_error_misaligned_l0a_address():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        l1, l0a = ns.TBuf(ns.TPosition.A1), ns.TBuf(ns.TPosition.A2)
        pipe.init_buffer(l1, 2048)
        pipe.init_buffer(l0a, 2048)
        ns.data_copy(l1.get(ns.float16), x, 1024)
        ns.set_flag(H.MTE2_MTE1, 0)
        ns.wait_flag(H.MTE2_MTE1, 0)
        ns.load_data(l0a.get(ns.float16)[16:], l1.get(ns.float16), ns.LoadData2DParams())  # MISALIGNED

    with pytest.raises(ns.AlignmentError) as e:
        ns.launch(k, 1, x16())
    msg = str(e.value)
    assert "load_data" in msg and "L0A address 0x20" in msg and "not 512 B aligned" in msg
    assert "256 float16 elements (512 B)" in msg
    assert line_of(k, "MISALIGNED") in msg
    assert e.value.facts["address"] == 32 and e.value.facts["align"] == 512


def test_alignment_error_misaligned_ub_address():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 1024)
        ns.data_copy(b.get(ns.float16)[1:], x, 16)

    with pytest.raises(ns.AlignmentError, match="UB address 0x2, which is not 32 B aligned"):
        ns.launch(k, 1, x16())


def test_alignment_error_mmad_destination_needs_1024_bytes():
    @ns.kernel
    def k():
        pipe = ns.TPipe()
        a, b, c = ns.TBuf(ns.TPosition.A2), ns.TBuf(ns.TPosition.B2), ns.TBuf(ns.TPosition.CO1)
        for t in (a, b):
            pipe.init_buffer(t, 512)
        pipe.init_buffer(c, 2048)
        ns.mmad(c.get(ns.float32)[128:], a.get(ns.float16), b.get(ns.float16), m=16, n=16, k=16)

    with pytest.raises(ns.AlignmentError, match="L0C address 0x200, which is not 1024 B aligned"):
        ns.launch(k, 1, sanitize="error")


# ---------------------------------------------------------------------------------------------------------
# OutOfBoundsError
# ---------------------------------------------------------------------------------------------------------
def test_out_of_bounds_gm_past_the_end_gives_the_element_range():
    @ns.kernel
    def k(x, tile):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, tile * 2)
        for off in range(0, x.size, tile):
            ns.data_copy(b.get(ns.float16), x[off:], tile)  # LAST_TILE

    with pytest.raises(ns.OutOfBoundsError) as e:
        ns.launch(k, 1, x16(1000), 256, sanitize="off")
    msg = str(e.value)
    assert "GM out of bounds" in msg and "elements [768, 1024) of 'x'" in msg
    assert "which has 1000 elements (float16)" in msg and "24 element(s) past the end" in msg
    assert "min(tile, total - offset)" in msg
    assert line_of(k, "LAST_TILE") in msg
    assert e.value.facts["range"] == (768, 1024) and e.value.facts["size"] == 1000


def test_out_of_bounds_gm_write_and_blocked_copy_in_bytes():
    @ns.kernel
    def k(y):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 4096)
        ns.data_copy(y, b.get(ns.float16), ns.DataCopyParams(block_count=4, block_len=2, dst_stride=1))

    with pytest.raises(ns.OutOfBoundsError, match=r"bytes \[0, 352\) of 'y' \(320 B = 160 float16\); 32 B past"):
        ns.launch(k, 1, np.zeros(160, np.float16))


def test_out_of_bounds_local_tensor():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 64)
        ns.data_copy(b.get(ns.float16), x, 64)  # TOO_LONG

    with pytest.raises(ns.OutOfBoundsError) as e:
        ns.launch(k, 1, x16())
    msg = str(e.value)
    assert "elements [0, 64) of local tensor 'b', which has 32 elements" in msg and "64 B at VECCALC" in msg
    assert line_of(k, "TOO_LONG") in msg


def test_out_of_bounds_local_slice():
    @ns.kernel
    def k():
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 64)
        b.get(ns.float16)[10:100]

    with pytest.raises(ns.OutOfBoundsError, match=r"\[10:100\] is outside its 32 elements"):
        ns.launch(k, 1)


# ---------------------------------------------------------------------------------------------------------
# TensorStateError
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def lifecycle(x, mistake):
    pipe = ns.TPipe()
    q = ns.TQue(ns.TPosition.VECIN)
    pipe.init_buffer(q, 1, 2048)
    t = q.alloc_tensor(ns.float16)
    ns.data_copy(t, x, 1024)
    q.enque(t)
    if mistake == "use_enqueued":
        ns.adds(t, t, 1.0, 1024)  # USE_ENQUEUED
    t = q.deque()
    ns.adds(t, t, 1.0, 1024)
    q.free_tensor(t)  # FREED
    if mistake == "use_after_free":
        ns.adds(t, t, 1.0, 1024)  # USE_AFTER_FREE
    if mistake == "free_twice":
        q.free_tensor(t)


def test_tensor_state_error_use_after_free():
    with pytest.raises(ns.TensorStateError) as e:
        ns.launch(lifecycle, 1, x16(), "use_after_free")
    msg = str(e.value)
    assert "adds uses 'q' after free_tensor" in msg
    assert f"freed at {line_of(lifecycle, 'FREED')}" in msg
    assert line_of(lifecycle, "USE_AFTER_FREE") in msg


def test_tensor_state_error_use_while_enqueued():
    with pytest.raises(ns.TensorStateError) as e:
        ns.launch(lifecycle, 1, x16(), "use_enqueued")
    msg = str(e.value)
    assert "adds uses 'q' while it is enqueued" in msg and "deque()" in msg
    assert line_of(lifecycle, "USE_ENQUEUED") in msg


def test_tensor_state_error_free_twice():
    with pytest.raises(ns.TensorStateError, match="already freed"):
        ns.launch(lifecycle, 1, x16(), "free_twice")


_kept: dict = {}


@ns.kernel
def keeps_its_tensors(x):
    pipe = ns.TPipe()
    buf, q = ns.TBuf(ns.TPosition.VECCALC), ns.TQue(ns.TPosition.VECIN)
    pipe.init_buffer(buf, 2048)
    pipe.init_buffer(q, 1, 2048)
    _kept["scratch"] = t = buf.get(ns.float16)
    ns.data_copy(t, x, 1024)
    _kept["queue"] = q


@ns.kernel
def uses_kept(x, what):
    pipe = ns.TPipe()
    buf = ns.TBuf(ns.TPosition.VECCALC)
    pipe.init_buffer(buf, 2048)
    mine = buf.get(ns.float16)
    if what == "copy in":
        ns.data_copy(_kept["scratch"], x, 1024)
    elif what == "add":
        ns.add(mine, _kept["scratch"], mine, 1024)
    elif what == "copy out":
        ns.data_copy(x, _kept["scratch"], 1024)
    elif what == "enque":   # this launch's queue, the earlier launch's tensor
        q = ns.TQue(ns.TPosition.VECIN)
        pipe.init_buffer(q, 1, 2048)
        q.enque(_kept["scratch"])
    else:
        _kept["queue"].alloc_tensor(ns.float16)


@pytest.mark.parametrize("what", ["copy in", "add", "copy out", "enque", "queue"])
def test_a_tensor_or_queue_kept_from_an_ended_launch_is_refused(what):
    # the launch unties its core from its memories (Core.release): without a check, a tensor kept in a
    # variable would reach an instruction of the next launch with its old memory (silently wrong) or none
    ns.launch(keeps_its_tensors, 1, x16())
    err = ns.UsageError if what == "queue" else ns.TensorStateError
    with pytest.raises(err, match="from a launch that has ended") as e:
        ns.launch(uses_kept, 1, x16(), what)
    assert "lives for one launch" in e.value.hint


def test_correct_lifecycle_passes():
    ns.launch(lifecycle, 1, x16(), None)


# ---------------------------------------------------------------------------------------------------------
# QueueError
# ---------------------------------------------------------------------------------------------------------
def test_queue_error_alloc_beyond_buffer_count():
    @ns.kernel
    def k():
        pipe = ns.TPipe()
        q = ns.TQue(ns.TPosition.VECIN)
        pipe.init_buffer(q, 2, 64)
        q.alloc_tensor(ns.float16)  # FIRST
        q.alloc_tensor(ns.float16)
        q.alloc_tensor(ns.float16)  # THIRD

    with pytest.raises(ns.QueueError) as e:
        ns.launch(k, 1)
    msg = str(e.value)
    assert "alloc_tensor on 'q' (VECIN) but all 2 buffer(s) are in use" in msg
    assert f"'q'[0] (allocated at {line_of(k, 'FIRST')})" in msg
    assert line_of(k, "THIRD") in msg and "free_tensor()" in msg


def test_queue_error_deque_from_an_empty_queue():
    @ns.kernel
    def k():
        pipe = ns.TPipe()
        q = ns.TQue(ns.TPosition.VECOUT)
        pipe.init_buffer(q, 1, 64)
        q.deque()  # EMPTY

    with pytest.raises(ns.QueueError) as e:
        ns.launch(k, 1)
    msg = str(e.value)
    assert "deque() on 'q' (VECOUT) but nothing is enqueued" in msg
    assert "PIPE_MTE3 would wait forever" in msg  # VECOUT is consumed by MTE3
    assert line_of(k, "EMPTY") in msg


def test_queue_error_tensor_left_allocated_at_kernel_end():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        q = ns.TQue(ns.TPosition.VECIN)
        pipe.init_buffer(q, 1, 2048)
        t = q.alloc_tensor(ns.float16)  # TAKEN
        ns.data_copy(t, x, 1024)
        q.enque(t)

    with pytest.raises(ns.QueueError) as e:
        ns.launch(k, 1, x16())
    msg = str(e.value)
    assert "kernel ended with buffer 'q' of queue 'q' still enqueued" in msg
    assert line_of(k, "TAKEN").split(":")[0] in msg
    assert "free_tensor" in msg


def test_queue_error_enque_beyond_depth():
    @ns.kernel
    def k():
        pipe = ns.TPipe()
        q = ns.TQue(ns.TPosition.VECIN, depth=1)
        pipe.init_buffer(q, 2, 64)
        a, b = q.alloc_tensor(ns.float16), q.alloc_tensor(ns.float16)
        q.enque(a)
        q.enque(b)

    with pytest.raises(ns.QueueError, match=r"already holds 1 tensor\(s\) \(depth=1\)"):
        ns.launch(k, 1)


# ---------------------------------------------------------------------------------------------------------
# RaceError: RAW, WAR, WAW between pipes on a TBuf; the fixes; happens-before, not timing
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def hazard(x, y, kind, fix):
    pipe = ns.TPipe()
    b = ns.TBuf()
    pipe.init_buffer(b, 2048)
    t = b.get(ns.float16)
    if kind == "RAW":
        ns.data_copy(t, x, 1024)  # FIRST_RAW
        if fix:
            ns.set_flag(H.MTE2_V, 0)
            ns.wait_flag(H.MTE2_V, 0)
        ns.muls(t[512:], t[:512], 2.0, 512)  # SECOND_RAW
    elif kind == "WAR":
        ns.duplicate(t, 1.0, 1024)
        ns.set_flag(H.V_MTE3, 0)
        ns.wait_flag(H.V_MTE3, 0)
        ns.data_copy(y, t, 1024)  # FIRST_WAR
        if fix:
            ns.set_flag(H.MTE3_V, 0)
            ns.wait_flag(H.MTE3_V, 0)
        ns.duplicate(t, 2.0, 1024)  # SECOND_WAR
    else:  # WAW
        ns.data_copy(t, x, 1024)  # FIRST_WAW
        if fix:
            ns.set_flag(H.MTE2_V, 0)
            ns.wait_flag(H.MTE2_V, 0)
        ns.duplicate(t, 2.0, 1024)  # SECOND_WAW


@pytest.mark.parametrize("kind,pipes,verbs,event", [
    ("RAW", ("PIPE_MTE2", "PIPE_V"), ("write (data_copy)", "read (muls)"), "MTE2_V"),
    ("WAR", ("PIPE_MTE3", "PIPE_V"), ("read (data_copy)", "write (duplicate)"), "MTE3_V"),
    ("WAW", ("PIPE_MTE2", "PIPE_V"), ("write (data_copy)", "write (duplicate)"), "MTE2_V"),
])
def test_race_between_pipes_on_a_tbuf(kind, pipes, verbs, event):
    with pytest.raises(ns.RaceError) as e:
        ns.launch(hazard, 1, x16(), np.zeros(1024, np.float16), kind, False)
    msg = str(e.value)
    first, second = line_of(hazard, f"FIRST_{kind}"), line_of(hazard, f"SECOND_{kind}")
    assert f"{kind} hazard in UB (VECCALC buffer 'b')" in msg
    assert f"{pipes[1]} {verbs[1]} at {second} is not ordered after {pipes[0]} {verbs[0]} at {first}" in msg
    assert f"HardEvent {event}" in msg
    assert e.value.facts["kind"] == kind
    assert e.value.facts["pipes"] == tuple(ns.Pipe[p[5:]] for p in pipes)
    assert e.value.facts["memory"] == "UB"
    lo, hi = e.value.facts["address"]
    assert hi > lo
    assert re.search(r"bytes \[0x[0-9a-f]+, 0x[0-9a-f]+\) of block 0", msg)
    # set_flag / wait_flag on the right HardEvent orders the two pipes: no race
    ns.launch(hazard, 1, x16(), np.zeros(1024, np.float16), kind, True)


@ns.kernel
def hazard_with_queues(x, y):
    """The RAW/WAR/WAW accesses of ``hazard``, ordered by a queue instead of flags."""
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
    q_v = ns.TQue(ns.TPosition.VECIN)
    pipe.init_buffer(q, 1, 2048)
    pipe.init_buffer(q_v, 1, 2048)
    for _ in range(3):  # the second round re-uses the buffers: alloc waits for the last free (WAR, WAW)
        t = q.alloc_tensor(ns.float16)
        ns.data_copy(t, x, 1024)
        q.enque(t)
        t = q.deque()
        ns.data_copy(y, t, 1024)
        q.free_tensor(t)
        v = q_v.alloc_tensor(ns.float16)
        ns.data_copy(v, x, 1024)
        q_v.enque(v)
        v = q_v.deque()
        ns.muls(v, v, 2.0, 1024)
        q_v.free_tensor(v)


def test_queues_order_the_same_accesses():
    res = ns.launch(hazard_with_queues, 1, x16(), np.zeros(1024, np.float16))
    np.testing.assert_array_equal(res["y"], x16())


def test_race_is_decided_by_happens_before_not_by_timing():
    @ns.kernel
    def k(x, fix):
        pipe = ns.TPipe()
        b, s = ns.TBuf(), ns.TBuf()
        pipe.init_buffer(b, 2048)
        pipe.init_buffer(s, 64)
        ns.data_copy(b.get(ns.float16), x, 1024)
        for _ in range(20):  # the scalar unit is busy long after the copy has finished
            s.get(ns.float16).set_value(0, 1.0)
        if fix:
            ns.set_flag(H.MTE2_V, 0)
            ns.wait_flag(H.MTE2_V, 0)
        ns.muls(b.get(ns.float16), b.get(ns.float16), 2.0, 1024)

    timed = ns.launch(k, 1, x16(), False, sanitize="off").profile
    copy = [r for r in timed.instructions if r.op == "data_copy"][0]
    mul = [r for r in timed.instructions if r.op == "muls"][0]
    assert mul.start > copy.end  # in this run the timing happened to separate the accesses...
    with pytest.raises(ns.RaceError, match="RAW hazard"):  # ...but nothing orders them
        ns.launch(k, 1, x16(), False)
    ns.launch(k, 1, x16(), True)


def test_pipe_barrier_all_orders_every_pipe():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 2048)
        ns.data_copy(b.get(ns.float16), x, 1024)
        ns.pipe_barrier(ns.Pipe.ALL)
        ns.muls(b.get(ns.float16), b.get(ns.float16), 2.0, 1024)

    ns.launch(k, 1, x16())


def test_same_pipe_accesses_are_ordered():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 2048)
        ns.duplicate(b.get(ns.float16), 0.0, 1024)
        ns.muls(b.get(ns.float16), b.get(ns.float16), 2.0, 1024)
        ns.adds(b.get(ns.float16), b.get(ns.float16), 2.0, 1024)

    ns.launch(k, 1, x16())


def test_disjoint_parts_of_a_tbuf_do_not_race():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 4096)
        t = b.get(ns.float16)
        ns.data_copy(t, x, 1024)                    # MTE2 writes the first half
        ns.duplicate(t[1024:], 2.0, 1024)           # V writes the second half at the same time

    ns.launch(k, 1, x16())


# --- between cores ---------------------------------------------------------------------------------------
@ns.kernel
def blocks_write(y, tile, step):
    """Block b writes ``tile`` elements of y at ``b * step``: overlapping when step < tile."""
    b = ns.get_block_idx()
    pipe = ns.TPipe()
    buf = ns.TBuf()
    pipe.init_buffer(buf, tile * 2)
    ns.duplicate(buf.get(ns.float16), float(b), tile)
    ns.set_flag(H.V_MTE3, 0)
    ns.wait_flag(H.V_MTE3, 0)
    ns.data_copy(y[b * step:], buf.get(ns.float16), tile)  # GM_WRITE


def test_multi_core_overlapping_gm_writes_race():
    with pytest.raises(ns.RaceError) as e:
        ns.launch(blocks_write, 4, np.zeros(1024, np.float16), 256, 240)
    msg = str(e.value)
    site = line_of(blocks_write, "GM_WRITE")
    assert "WAW hazard between cores in GM 'y', bytes [0x1e0, 0x200)" in msg
    assert f"block 1 PIPE_MTE3 write (data_copy) at {site} overlaps block 0 PIPE_MTE3 write (data_copy) at {site}" in msg
    assert "get_block_idx()" in msg
    assert e.value.facts["cores"] == (0, 1)
    # disjoint parts (the fix) are fine and give every block its own result
    res = ns.launch(blocks_write, 4, np.zeros(1024, np.float16), 256, 256)
    np.testing.assert_array_equal(res["y"], np.repeat(np.arange(4), 256).astype(np.float16))


def test_multi_core_read_of_another_blocks_output_races():
    @ns.kernel
    def k(y):
        b = ns.get_block_idx()
        pipe = ns.TPipe()
        buf = ns.TBuf()
        pipe.init_buffer(buf, 512)
        if b == 0:
            ns.duplicate(buf.get(ns.float16), 1.0, 256)
            ns.set_flag(H.V_MTE3, 0)
            ns.wait_flag(H.V_MTE3, 0)
            ns.data_copy(y, buf.get(ns.float16), 256)
        else:
            ns.data_copy(buf.get(ns.float16), y, 256)

    with pytest.raises(ns.RaceError, match="RAW hazard between cores in GM 'y'.*block 1 PIPE_MTE2 read"):
        ns.launch(k, 2, np.zeros(256, np.float16))


@FAST
@given(blen=st.tuples(st.integers(1, 3), st.integers(1, 3)), gap=st.tuples(st.integers(0, 4), st.integers(0, 4)),
       count=st.tuples(st.integers(1, 6), st.integers(1, 6)), off=st.integers(0, 12))
def test_strided_gm_writes_of_two_cores_race_exactly_when_bytes_overlap(blen, gap, count, off):
    @ns.kernel
    def k(y):
        b = ns.get_block_idx()
        pipe = ns.TPipe()
        buf = ns.TBuf()
        pipe.init_buffer(buf, 4096)
        p = ns.DataCopyParams(block_count=count[b], block_len=blen[b], dst_stride=gap[b])
        ns.duplicate(buf.get(ns.float16), 1.0, 2048)
        ns.set_flag(H.V_MTE3, 0)
        ns.wait_flag(H.V_MTE3, 0)
        ns.data_copy(y[b * off * 16:], buf.get(ns.float16), p)

    def units(b):  # the 32 B units block b writes
        base = b * off
        return {base + i * (blen[b] + gap[b]) + j for i in range(count[b]) for j in range(blen[b])}

    overlap = bool(units(0) & units(1))
    y = np.zeros(16 * (off + 6 * 7 + 4), np.float16)
    if overlap:
        with pytest.raises(ns.RaceError, match="WAW hazard between cores"):
            ns.launch(k, 2, y)
    else:
        ns.launch(k, 2, y)


# ---------------------------------------------------------------------------------------------------------
# SyncError
# ---------------------------------------------------------------------------------------------------------
def test_sync_error_wait_flag_without_set_flag():
    @ns.kernel
    def k():
        ns.wait_flag(H.MTE2_V, 3)  # WAIT

    with pytest.raises(ns.SyncError) as e:
        ns.launch(k, 1)
    msg = str(e.value)
    assert "wait_flag(MTE2_V, 3) in block 0 has no set_flag before it" in msg
    assert "PIPE_V would wait forever" in msg and "set_flag(MTE2_V, 3)" in msg
    assert line_of(k, "WAIT") in msg
    assert e.value.facts == {"event": H.MTE2_V, "event_id": 3}


def test_sync_error_unpaired_set_flag():
    @ns.kernel
    def k():
        ns.set_flag(H.V_MTE3, 1)  # SET

    with pytest.raises(ns.SyncError) as e:
        ns.launch(k, 1)
    msg = str(e.value)
    assert "unpaired set_flag(V_MTE3, 1) from PIPE_V to PIPE_MTE3 in block 0" in msg
    assert "wait_flag(V_MTE3, 1)" in msg and line_of(k, "SET") in msg


@pytest.mark.parametrize("config,event_id,ok", [("a2", 7, True), ("a2", 8, False), ("classic", 3, True),
                                                ("classic", 4, False), ("a2", -1, False)])
def test_sync_error_event_id_out_of_range(config, event_id, ok):
    @ns.kernel
    def k():
        ns.set_flag(H.V_MTE3, event_id)
        ns.wait_flag(H.V_MTE3, event_id)

    if ok:
        ns.launch(k, 1, config=config)
        return
    with pytest.raises(ns.SyncError) as e:
        ns.launch(k, 1, config=config)
    last = ns.get_config(config).event_ids - 1
    assert f"set_flag(V_MTE3, {event_id}): event id out of range; '{config}' has event ids 0..{last}" in str(e.value)


def test_sync_error_negative_event_id_message():
    with pytest.raises(ns.SyncError) as e:
        ns.launch(lambda: (ns.set_flag(H.V_MTE3, -1), ns.wait_flag(H.V_MTE3, -1)), 1)
    assert "smaller" not in str(e.value)
    assert e.value.facts.get("event_id") == -1


def test_sync_error_flag_set_twice():
    @ns.kernel
    def k():
        ns.set_flag(H.V_MTE3, 2)  # SET_ONCE
        ns.set_flag(H.V_MTE3, 2)  # SET_TWICE
        ns.wait_flag(H.V_MTE3, 2)

    with pytest.raises(ns.SyncError) as e:
        ns.launch(k, 1)
    msg = str(e.value)
    assert f"set_flag(V_MTE3, 2) while the same flag is still set (from {line_of(k, 'SET_ONCE')})" in msg
    assert line_of(k, "SET_TWICE") in msg


def test_flag_api_misuse_is_a_usage_error():
    with pytest.raises(ns.UsageError, match="HardEvent"):
        ns.launch(lambda: ns.set_flag("MTE2_V", 0), 1)
    with pytest.raises(ns.UsageError, match="no kernel is running"):
        ns.set_flag(H.MTE2_V, 0)


# ---------------------------------------------------------------------------------------------------------
# DtypeError
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def mmad_dtypes(in_dt, acc_dt):
    pipe = ns.TPipe()
    a, b, c = ns.TBuf(ns.TPosition.A2), ns.TBuf(ns.TPosition.B2), ns.TBuf(ns.TPosition.CO1)
    for t in (a, b, c):
        pipe.init_buffer(t, 1024)
    ns.mmad(c.get(acc_dt), a.get(in_dt), b.get(in_dt), m=16, n=16, k=8)  # MMAD


def test_dtype_error_fp32_mmad_on_classic():
    with pytest.raises(ns.DtypeError) as e:
        ns.launch(mmad_dtypes, 1, ns.float32, ns.float32, config="classic")
    msg = str(e.value)
    assert "the 'classic' Cube does not take float32 inputs (it takes float16, int8)" in msg
    assert "cast the inputs to float16" in msg and line_of(mmad_dtypes, "MMAD") in msg
    assert isinstance(e.value, TypeError)  # DtypeError is also a TypeError


def test_dtype_error_fp16_accumulation_on_a2():
    with pytest.raises(ns.DtypeError) as e:
        ns.launch(mmad_dtypes, 1, ns.float16, ns.float16)
    msg = str(e.value)
    assert "fp16 -> fp16 accumulation is not supported on 'a2'" in msg
    assert "float32 L0C tensor" in msg and "classic" in msg


def test_dtype_error_mixed_inputs():
    @ns.kernel
    def k():
        pipe = ns.TPipe()
        a, b, c = ns.TBuf(ns.TPosition.A2), ns.TBuf(ns.TPosition.B2), ns.TBuf(ns.TPosition.CO1)
        for t in (a, b, c):
            pipe.init_buffer(t, 1024)
        ns.mmad(c.get(ns.float32), a.get(ns.float16), b.get(ns.bfloat16), m=16, n=16, k=16)

    with pytest.raises(ns.DtypeError, match="a is float16 but b is bfloat16"):
        ns.launch(k, 1, sanitize="off")


# ---------------------------------------------------------------------------------------------------------
# sanitize="warn" and sanitize="off"
# ---------------------------------------------------------------------------------------------------------
def test_warn_mode_turns_recoverable_errors_into_warnings_and_truncates_like_hardware():
    x = x16()
    y = np.full(1024, -1, np.float16)
    with pytest.warns(ns.SanitizerWarning) as w:
        res = ns.launch(short_copy, 1, x, y, 40, sanitize="warn")
    texts = [str(r.message) for r in w if issubclass(r.category, ns.SanitizerWarning)]
    assert len(texts) == 2
    assert all(t.startswith("AlignmentError: data_copy of 40 float16 elements = 80 B") for t in texts)
    assert "GM -> UB" in texts[0] and "UB -> GM" in texts[1]
    # the hardware drops the last 16 B (8 elements): 32 elements are copied, the rest of y is untouched
    expected = np.full(1024, -1, np.float16)
    expected[:32] = x[:32]
    np.testing.assert_array_equal(res["y"], expected)
    copies = [r for r in res.profile.instructions if r.op == "data_copy"]
    assert [r.nbytes for r in copies] == [64, 64]


def test_warn_mode_reports_races_and_sync_errors_and_completes():
    with pytest.warns(ns.SanitizerWarning) as w:
        res = ns.launch(hazard, 1, x16(), np.zeros(1024, np.float16), "RAW", False, sanitize="warn")
    assert [str(r.message).split(" in ")[0] for r in w] == ["RaceError: RAW hazard", "RaceError: WAW hazard"]
    assert res.profile.total_cycles > 0

    @ns.kernel
    def k():
        ns.wait_flag(H.MTE2_V, 0)
        ns.set_flag(H.V_MTE3, 0)

    with pytest.warns(ns.SanitizerWarning) as w:
        ns.launch(k, 1, sanitize="warn")
    texts = [str(r.message) for r in w]
    assert any("has no set_flag" in t for t in texts) and any("unpaired set_flag" in t for t in texts)


@pytest.mark.parametrize("kernel_args,error", [
    (("capacity",), ns.CapacityError), (("oob",), ns.OutOfBoundsError), (("state",), ns.TensorStateError),
    (("queue",), ns.QueueError), (("dtype",), ns.DtypeError)])
def test_warn_mode_still_raises_unrecoverable_errors(kernel_args, error):
    @ns.kernel
    def k(x, what):
        pipe = ns.TPipe()
        q = ns.TQue(ns.TPosition.VECIN)
        pipe.init_buffer(q, 1, 64)
        if what == "capacity":
            pipe.init_buffer(ns.TBuf(), 1 << 20)
        elif what == "oob":
            ns.data_copy(q.alloc_tensor(ns.float16), x, 64)
        elif what == "state":
            t = q.alloc_tensor(ns.float16)
            q.enque(t)
            q.free_tensor(t)
        elif what == "queue":
            q.deque()
        else:
            mmad_dtypes(ns.float16, ns.float16)

    assert not error.recoverable
    with pytest.raises(error):
        ns.launch(k, 1, x16(), *kernel_args, sanitize="warn")


def test_off_mode_skips_races_but_not_bounds():
    res = ns.launch(hazard, 1, x16(), np.zeros(1024, np.float16), "WAW", False, sanitize="off")
    assert res.profile.total_cycles > 0
    ns.launch(blocks_write, 4, np.zeros(1024, np.float16), 256, 240, sanitize="off")
    with pytest.raises(ns.OutOfBoundsError):
        ns.launch(blocks_write, 4, np.zeros(1000, np.float16), 256, 256, sanitize="off")
    with pytest.raises(ns.UsageError, match="sanitize must be"):
        ns.launch(hazard, 1, x16(), np.zeros(1024, np.float16), "WAW", False, sanitize="strict")


def test_off_mode_keeps_the_checks_other_than_races():
    with pytest.raises(ns.AlignmentError):
        ns.launch(short_copy, 1, x16(), np.zeros(1024, np.float16), 40, sanitize="off")
    with pytest.raises(ns.SyncError):
        ns.launch(lambda: ns.wait_flag(H.MTE2_V, 0), 1, sanitize="off")


def test_error_hierarchy():
    for cls in (ns.CapacityError, ns.AlignmentError, ns.OutOfBoundsError, ns.TensorStateError, ns.QueueError,
                ns.RaceError, ns.SyncError, ns.DtypeError):
        assert issubclass(cls, ns.SanitizerError) and issubclass(cls, ns.NpuSimError)
    assert issubclass(ns.UsageError, ValueError)
    assert ns.RaceError.recoverable and ns.SyncError.recoverable and ns.AlignmentError.recoverable


# ---------------------------------------------------------------------------------------------------------
# the race checker against a happens-before oracle, on generated programs
# ---------------------------------------------------------------------------------------------------------
FLAG_EVENTS = [H.MTE2_V, H.V_MTE3, H.MTE2_MTE3, H.V_MTE2, H.MTE3_V, H.MTE3_MTE2]
CHUNK = 16  # fp16 elements = 32 B
ops = st.tuples(st.sampled_from(["in", "dup", "mul", "out"]), st.integers(0, 7), st.integers(1, 3),
                st.integers(0, 7))


@ns.kernel
def random_program(x, y, program):
    pipe = ns.TPipe()
    b = ns.TBuf()
    pipe.init_buffer(b, 11 * CHUNK * 2)
    t = b.get(ns.float16)
    ns.duplicate(t, 0.0, 11 * CHUNK)  # defined contents (initcheck), ordered before everything by the barrier
    ns.pipe_barrier(ns.Pipe.ALL)
    for step in program:
        if step[0] == "set":
            ns.set_flag(step[1], step[2])
        elif step[0] == "wait":
            ns.wait_flag(step[1], step[2])
        else:
            kind, at, length, other = step
            lo, n = at * CHUNK, length * CHUNK
            if kind == "in":
                ns.data_copy(t[lo:], x, n)
            elif kind == "dup":
                ns.duplicate(t[lo:], 1.0, n)
            elif kind == "mul":
                ns.muls(t[lo:], t[other * CHUNK:], 2.0, n)
            else:
                ns.data_copy(y, t[lo:], n)


def _accesses(step):
    """(pipe, [(lo, hi, is_write)]) of one instruction, in chunks."""
    kind, at, length, other = step
    if kind == "in":
        return ns.Pipe.MTE2, [(at, at + length, True)]
    if kind == "dup":
        return ns.Pipe.V, [(at, at + length, True)]
    if kind == "mul":
        return ns.Pipe.V, [(other, other + length, False), (at, at + length, True)]
    return ns.Pipe.MTE3, [(at, at + length, False)]


def _has_race(program) -> bool:
    """Oracle: a DAG of instructions, set_flag and wait_flag nodes with program-order edges along each pipe
    and an edge from every set_flag to its wait_flag; two accesses race when they overlap, one writes, they
    are on different pipes and neither reaches the other."""
    nodes, edges, last = [], {}, {}

    def add(pipe):
        i = len(nodes)
        edges[i] = set()
        if pipe in last:
            edges[last[pipe]].add(i)
        last[pipe] = i
        return i

    sets = {}
    instr = []
    for step in program:
        if step[0] == "set":
            sets[(step[1], step[2])] = add(step[1].src)
            nodes.append(None)
        elif step[0] == "wait":
            w = add(step[1].dst)
            nodes.append(None)
            edges[sets.pop((step[1], step[2]))].add(w)
        else:
            pipe, acc = _accesses(step)
            i = add(pipe)
            nodes.append((pipe, acc))
            instr.append(i)
    reach = {}
    for i in reversed(range(len(nodes))):
        r = set()
        for j in edges[i]:
            r |= {j} | reach[j]
        reach[i] = r
    for a_i, a in enumerate(instr):
        for b in instr[a_i + 1:]:
            (pa, acc_a), (pb, acc_b) = nodes[a], nodes[b]
            if pa == pb or b in reach[a]:
                continue
            for lo1, hi1, w1 in acc_a:
                for lo2, hi2, w2 in acc_b:
                    if lo1 < hi2 and lo2 < hi1 and (w1 or w2):
                        return True
    return False


@st.composite
def programs(draw):
    body = draw(st.lists(ops, min_size=2, max_size=7))
    program = list(body)
    for eid in range(draw(st.integers(0, 5))):  # matched set/wait pairs at random places
        ev = draw(st.sampled_from(FLAG_EVENTS))
        i = draw(st.integers(0, len(program)))
        program.insert(i, ("set", ev, eid))
        j = draw(st.integers(i + 1, len(program)))
        program.insert(j, ("wait", ev, eid))
    return program


@settings(FAST, max_examples=60)
@given(program=programs())
def test_race_checker_agrees_with_a_happens_before_oracle(program):
    x, y = np.ones(4 * CHUNK, np.float16), np.zeros(4 * CHUNK, np.float16)
    expected = _has_race(program)
    if expected:
        with pytest.raises(ns.RaceError):
            ns.launch(random_program, 1, x, y, program)
    else:
        ns.launch(random_program, 1, x, y, program)


def test_out_of_bounds_past_the_end_of_a_gm_slice():
    @ns.kernel
    def k(x):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 1024)
        part = x[0:16]
        assert len(part) == 16
        ns.data_copy(b.get(ns.float16), part, 64)

    with pytest.raises(ns.OutOfBoundsError, match=r"\[0, 64\)"):
        ns.launch(k, 1, x16(128))


@pytest.mark.parametrize("make", [lambda: ns.TQue(ns.TPosition.VECCALC),
                                  lambda: ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.A1)], ids=["VECCALC", "bind"])
def test_queue_at_a_position_without_queues_is_a_usage_error(make):
    @ns.kernel
    def k():
        pipe = ns.TPipe()
        pipe.init_buffer(make(), 1, 64)

    with pytest.raises(ns.UsageError, match="TBuf|supported"):
        ns.launch(k, 1)


def test_negative_gm_slice_is_explained():
    @ns.kernel
    def k(x, y):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, 64)
        ns.data_copy(b.get(ns.float16), x[-16:], 16)
        ns.set_flag(H.MTE2_MTE3, 0)
        ns.wait_flag(H.MTE2_MTE3, 0)
        ns.data_copy(y, b.get(ns.float16), 16)

    x = x16(64)
    try:
        res = ns.launch(k, 1, x, np.zeros(16, np.float16))
    except ns.NpuSimError as e:
        assert "negative" in str(e).lower() and "past the end" not in str(e)
    else:  # or numpy's meaning: the last 16 elements
        np.testing.assert_array_equal(res["y"], x[-16:])
