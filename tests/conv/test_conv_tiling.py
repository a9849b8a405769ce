"""The tiling helper: its choices always fit and are legal; bad user tilings fail before any launch."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import npusim as ns
import npusim.conv as conv
from npusim.conv.tiling import ConvTiling

pytestmark = pytest.mark.conv

SUPPORTED = {"direct": ("float16",), "reuse": ("float16",), "layout": ("float16", "float32", "int8"),
             "img2col": ("float16", "float32", "int8")}


@st.composite
def geometries(draw):
    """Lab-sized and real-network-sized layers (up to 512 channels, 224 x 224, 7 x 7 kernels)."""
    big = draw(st.booleans())
    cmax, hmax = (512, 224) if big else (40, 20)
    k = draw(st.integers(1, 7 if big else 5))
    variant = draw(st.sampled_from(conv.VARIANTS))
    dtype = draw(st.sampled_from(SUPPORTED[variant]))
    h, w = draw(st.integers(1, hmax)), draw(st.integers(1, hmax))
    s, p, d = draw(st.integers(1, 3)), draw(st.integers(0, 3)), draw(st.integers(1, 2))
    assume(min(h, w) + 2 * p >= d * (k - 1) + 1)
    cin, cout = draw(st.integers(1, cmax)), draw(st.integers(1, cmax))
    g = conv.ConvGeometry.of((draw(st.integers(1, 4)), cin, h, w), (cout, cin, k, k), s, p, d, dtype)
    return variant, g


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(case=geometries(), preset=st.sampled_from(["a2", "classic"]))
def test_chosen_tilings_always_fit(case, preset):
    variant, g = case
    cfg = ns.get_config(preset)
    if g.dtype not in cfg.cube_macs_per_cycle:
        with pytest.raises(ns.DtypeError):
            conv.choose_tiling(g, cfg, variant)
        return
    t = conv.choose_tiling(g, cfg, variant)
    t.check(g, cfg)                                     # legal by its own rules
    for mem, used in t.usage(g, cfg).items():           # fits every memory, with alignment
        assert used <= cfg.memory_bytes(mem), (mem, used)
    plan = t.plan(g, cfg)
    assert sum(b.num for b in plan.values()) <= cfg.max_buffers
    assert 1 <= t.rows <= g.ho and 1 <= t.cols <= g.wo
    assert t.cout_block == g.cout or t.cout_block % 16 == 0
    assert t.cin_block >= g.cin or t.cin_block % g.c0 == 0
    if variant == "img2col":
        assert t.m_tile % 16 == 0 and t.k_tile % g.c0 == 0 and t.cols == g.wo
        assert plan["a"].length == t.m_tile * t.k_tile * g.isz
    if cfg.memory_bytes("L1") >= 2 * plan.get("band", plan.get("copies", plan["const"])).length + \
            plan["weights"].length + plan["const"].length + 64 * 1024:
        assert t.l1_buffers == 2  # double buffering wherever it comfortably fits


@pytest.mark.parametrize("variant", conv.VARIANTS)
@pytest.mark.parametrize("preset", ["a2", "classic"])
def test_the_kernel_reserves_exactly_the_plan(variant, preset):
    """The kernels take their buffer sizes from ConvTiling.plan: the profile's reserved bytes match."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 20, 9, 11)).astype(np.float16)
    w = rng.standard_normal((24, 20, 3, 3)).astype(np.float16)
    res = conv.conv2d(x, w, None, (1, 2), 1, variant=variant, config=preset)
    cfg = ns.get_config(preset)
    assert res.profile.reserved_bytes == res.tiling.usage(res.geometry, cfg)


def test_explain_says_what_limited_each_size():
    g = conv.ConvGeometry.of((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1, "float16")
    for variant in conv.VARIANTS:
        text = conv.choose_tiling(g, "a2", variant).explain()
        assert text.splitlines()[0].startswith(variant)
        for word in ("rows=", "cin_block=", "cout_block=", "weights"):
            assert word in text, (variant, word)
    text = conv.choose_tiling(g, "a2", "img2col").explain()
    assert "L0C" in text and "L0A" in text and "L1" in text and "double buffering" in text
    assert "m_tile=" in text and "k_tile=" in text
    assert "given by the caller" in ConvTiling("img2col", 1, 56, 64, 64, 16, 16).explain()


def _no_launch(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a kernel was launched with an invalid tiling")
    monkeypatch.setattr(ns, "launch", boom)


@pytest.mark.parametrize("changes,error,match", [
    (dict(m_tile=40), ns.UsageError, "m_tile=40 must be a positive multiple of 16"),
    (dict(k_tile=24), ns.UsageError, "k_tile=24 must be a positive multiple of C0=16"),
    (dict(cout_block=20), ns.UsageError, "cout_block=20"),
    (dict(rows=0), ns.UsageError, "rows=0"),
    (dict(cols=16), ns.UsageError, "img2col takes whole output rows"),
    (dict(l0_buffers=0), ns.UsageError, "l0_buffers"),
    (dict(m_tile=2048, k_tile=256), ns.CapacityError, "L0"),
    (dict(m_tile=4096), ns.UsageError, "4095"),
    (dict(rows=56, l1_buffers=2), ns.CapacityError, "L1"),
])
def test_invalid_user_tilings_fail_before_launching(monkeypatch, changes, error, match):
    _no_launch(monkeypatch)
    g = conv.ConvGeometry.of((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1, "float16")
    t = conv.choose_tiling(g, "a2", "img2col").replace(**changes)
    x = np.zeros((1, 64, 56, 56), np.float16)
    w = np.zeros((64, 64, 3, 3), np.float16)
    with pytest.raises(error, match=match):
        conv.conv2d(x, w, padding=1, tiling=t)


def test_rowwise_capacity_error_names_the_memory(monkeypatch):
    _no_launch(monkeypatch)
    g = conv.ConvGeometry.of((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1, "float16")
    t = conv.choose_tiling(g, "a2", "reuse").replace(rows=10, l1_buffers=1)
    with pytest.raises(ns.CapacityError, match=r"L0C \(CO1\)"):
        conv.conv2d(np.zeros((1, 64, 56, 56), np.float16), np.zeros((64, 64, 3, 3), np.float16), padding=1,
                    variant="reuse", tiling=t)
    with pytest.raises(ns.UsageError, match="given to the 'layout' variant"):
        conv.conv2d(np.zeros((1, 64, 56, 56), np.float16), np.zeros((64, 64, 3, 3), np.float16), padding=1,
                    variant="layout", tiling=t)
