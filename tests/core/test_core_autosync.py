"""launch(auto_sync=...): the compiler's automatic S <-> V/MTE2/MTE3 flags, exactly those and no others."""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns

H = ns.HardEvent


def _auto(res) -> list[str]:
    return [r[3] for recs in res.profile.block_records for r in recs if str(r[3]).startswith("auto_sync")]


@ns.kernel
def reduce_then_read(x, out, n):
    """A reduction read by the scalar unit with no flag: the pattern of 35 % of public learner kernels."""
    pipe = ns.TPipe()
    q = ns.TQue(ns.TPosition.VECIN)
    red, tmp = ns.TBuf(), ns.TBuf()
    pipe.init_buffer(q, 1, n * 4)
    pipe.init_buffer(red, 32)
    pipe.init_buffer(tmp, 256)
    t = q.alloc_tensor(ns.float32)
    ns.data_copy(t, x, n)
    q.enque(t)
    t = q.deque()
    ns.reduce_max(red.get(ns.float32), t, tmp.get(ns.float32), n)
    out.set_value(0, red.get(ns.float32).get_value(0))
    q.free_tensor(t)


@pytest.mark.parametrize("sanitize", ["error", "off"])
def test_get_value_after_vector_gets_one_v_s_flag(sanitize):
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    res = ns.launch(reduce_then_read, 1, x, np.zeros(8, np.float32), 64, sanitize=sanitize)
    assert res["out"][0] == x.max()
    assert _auto(res) == ["auto_sync V_S"]
    rec = next(r for r in res.profile.block_records[0] if r[3] == "auto_sync V_S")
    red = next(r for r in res.profile.block_records[0] if r[3] == "reduce_max")
    get = next(r for r in res.profile.block_records[0] if r[3] == "get_value")
    assert rec[2] == red[2] and get[1] >= red[2]   # the scalar unit waits for the reduction, then reads


def test_auto_sync_off_is_the_hand_written_model():
    with pytest.raises(ns.RaceError, match=r"PIPE_S read \(get_value\).*PIPE_V write \(reduce_max\)"):
        ns.launch(reduce_then_read, 1, np.zeros(64, np.float32), np.zeros(8, np.float32), 64, auto_sync=False)
    with pytest.raises(ns.UsageError, match="auto_sync must be True or False"):
        ns.launch(reduce_then_read, 1, np.zeros(64, np.float32), np.zeros(8, np.float32), 64, auto_sync="yes")


def test_hand_written_flags_get_no_second_flag():
    @ns.kernel
    def k(x, out, n):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, n * 4)
        t = b.get(ns.float32)
        ns.data_copy(t, x, n)
        ns.set_flag(H.MTE2_V, 0)
        ns.wait_flag(H.MTE2_V, 0)
        ns.muls(t, t, 2.0, n)
        ns.set_flag(H.V_S, 0)
        ns.wait_flag(H.V_S, 0)
        out.set_value(0, t.get_value(3))

    res = ns.launch(k, 1, np.arange(8, dtype=np.float32), np.zeros(8, np.float32), 8)
    assert res["out"][0] == 6 and _auto(res) == []


def test_set_value_then_vector_and_mte3_need_no_flag():
    @ns.kernel
    def k(y, n):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, n * 4)
        t = b.get(ns.float32)
        ns.duplicate(t, 0.0, n)
        t.set_value(1, 5.0)       # V wrote t: V_S before the write (WAW)
        ns.adds(t, t, 1.0, n)     # S -> V: ordered after the write
        ns.data_copy(y, t, n)     # MTE3 after V: the framework's job, hand-synchronised here
        # (no V_MTE3 flag: the compiler does not insert it, so this is still a race)

    with pytest.raises(ns.RaceError, match=r"PIPE_MTE3 read \(data_copy\).*PIPE_V write \(adds\)"):
        ns.launch(k, 1, np.zeros(8, np.float32), 8)


def test_only_the_scalar_pipes_are_synchronised():
    """MTE2 -> V without a queue or flag stays a race: the compiler does not insert that flag."""
    @ns.kernel
    def k(x, n):
        pipe = ns.TPipe()
        b = ns.TBuf()
        pipe.init_buffer(b, n * 4)
        t = b.get(ns.float32)
        ns.data_copy(t, x, n)
        ns.muls(t, t, 2.0, n)

    with pytest.raises(ns.RaceError, match=r"PIPE_V read \(muls\).*PIPE_MTE2 write"):
        ns.launch(k, 1, np.zeros(8, np.float32), 8)


def test_get_value_of_gm_written_by_mte3_gets_mte3_s():
    @ns.kernel
    def k(x, y, n):
        pipe = ns.TPipe()
        q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
        pipe.init_buffer(q, 1, n * 4)
        t = q.alloc_tensor(ns.float32)
        ns.data_copy(t, x, n)
        q.enque(t)
        t = q.deque()
        ns.data_copy(y, t, n)
        q.free_tensor(t)
        y.set_value(0, y.get_value(2) + 1)

    res = ns.launch(k, 1, np.arange(8, dtype=np.float32), np.zeros(8, np.float32), 8)
    assert res["y"][0] == 3 and _auto(res) == ["auto_sync MTE3_S"]
