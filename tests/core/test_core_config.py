"""HardwareConfig presets, immutability and replace() validation."""

import dataclasses

import pytest

import npusim as ns
from npusim.config import KB

pytestmark = pytest.mark.core


def test_a2_documented_values():
    c = ns.a2
    assert c.name == "a2"
    assert c.clock_ghz == 1.8
    assert c.ub_bytes == 192 * 1024
    assert c.l1_bytes == 512 * 1024
    assert c.l0a_bytes == 64 * 1024 and c.l0b_bytes == 64 * 1024
    assert c.l0c_bytes == 128 * 1024
    assert c.cube_macs_per_cycle["float16"] == 4096 == 16 * 16 * 16
    assert c.cube_macs_per_cycle["int8"] == 16 * 32 * 16
    assert c.cube_macs_per_cycle["float32"] == 4096 // 4
    assert c.event_ids == 8
    assert c.has_fixpipe is True
    assert c.cube_fp16_accumulate is False
    assert c.num_cores == 24


def test_classic_documented_values():
    c = ns.classic
    assert c.name == "classic"
    assert c.clock_ghz == 1.0
    assert c.ub_bytes == 256 * 1024
    assert c.l1_bytes == 1024 * 1024
    assert c.l0c_bytes == 256 * 1024
    assert c.l0a_bytes == 64 * 1024 and c.l0b_bytes == 64 * 1024
    assert "float32" not in c.cube_macs_per_cycle  # no fp32 on the Cube
    assert c.cube_macs_per_cycle["float16"] == 4096
    assert c.has_fixpipe is False  # no Fixpipe: L0C drains through UB
    assert c.cube_fp16_accumulate is True
    assert c.event_ids == 4
    assert c.num_cores == 32


def test_presets_registry_and_get_config():
    assert ns.PRESETS == {"a2": ns.a2, "classic": ns.classic}
    assert ns.presets is ns.PRESETS
    assert ns.get_config() is ns.a2
    assert ns.get_config(None) is ns.a2
    assert ns.get_config("classic") is ns.classic
    custom = ns.a2.replace(name="mine")
    assert ns.get_config(custom) is custom
    with pytest.raises(ValueError, match="unknown preset 'a3'"):
        ns.get_config("a3")


@pytest.mark.parametrize("cfg", [ns.a2, ns.classic], ids=["a2", "classic"])
def test_derived_quantities(cfg):
    assert cfg.chip_gm_bytes_per_cycle == pytest.approx(cfg.hbm_gb_per_s / cfg.clock_ghz)
    assert cfg.cube_peak_flops("float16") == pytest.approx(2 * 4096 * cfg.clock_ghz * 1e9)
    assert cfg.vector_peak_flops("float16") == pytest.approx(128 * cfg.clock_ghz * 1e9)
    assert cfg.vector_peak_flops("float32") == pytest.approx(64 * cfg.clock_ghz * 1e9)
    assert cfg.cycles_to_us(cfg.clock_ghz * 1000) == pytest.approx(1.0)
    for mem, field in (("UB", "ub_bytes"), ("L1", "l1_bytes"), ("L0A", "l0a_bytes"), ("L0B", "l0b_bytes"),
                       ("L0C", "l0c_bytes")):
        assert cfg.memory_bytes(mem) == getattr(cfg, field)


@pytest.mark.parametrize("active", [1, 2, 11, 12, 13, 24, 48, 100])
def test_gm_rate_formula(active):
    cfg = ns.a2
    expected = min(cfg.gm_port_bytes_per_cycle, cfg.hbm_gb_per_s / cfg.clock_ghz / active)
    assert cfg.gm_rate(active) == pytest.approx(expected)
    # with every core busy each gets an equal share of the one HBM; a lone core is limited by its own port
    assert ns.a2.gm_rate(1) == ns.a2.gm_port_bytes_per_cycle == 64
    assert ns.a2.gm_rate(ns.a2.num_cores) == pytest.approx(1600 / 1.8 / 24)


def test_l2_and_hbm_documented_values():
    assert ns.a2.l2_bytes == 192 * 1024 * 1024 and ns.classic.l2_bytes == 32 * 1024 * 1024
    assert ns.a2.l2_bytes_per_cycle == 110 and ns.classic.l2_bytes_per_cycle == 128
    assert ns.a2.hbm_gb_per_s == 1600 and ns.classic.hbm_gb_per_s == 1200
    assert ns.a2.l2_line_bytes == ns.classic.l2_line_bytes == 512
    assert ns.a2.memory_bytes("L2") == ns.a2.l2_bytes
    assert ("l2_bytes", "192 MB") in ns.a2.rows()


def test_configs_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ns.a2.ub_bytes = 1024  # type: ignore[misc]
    with pytest.raises(TypeError):
        ns.a2.cube_macs_per_cycle["float16"] = 1  # type: ignore[index]
    # a dict handed to the constructor is copied and frozen too
    macs = {"float16": 4096}
    cfg = ns.a2.replace(cube_macs_per_cycle=macs)
    macs["float16"] = 1
    assert cfg.cube_macs_per_cycle["float16"] == 4096
    with pytest.raises(TypeError):
        cfg.cube_macs_per_cycle["float16"] = 2  # type: ignore[index]


def test_replace_makes_a_new_config_and_keeps_the_preset():
    small = ns.a2.replace(name="a2-small-ub", ub_bytes=96 * KB)
    assert small.ub_bytes == 96 * KB and small.name == "a2-small-ub"
    assert ns.a2.ub_bytes == 192 * KB and ns.a2.name == "a2"
    assert small.l1_bytes == ns.a2.l1_bytes
    assert small != ns.a2


@pytest.mark.parametrize("field,value", [("ub_bytes", 0), ("clock_ghz", -1.0), ("event_ids", 0),
                                         ("gm_port_bytes_per_cycle", -64), ("num_cores", 0),
                                         ("gm_unaligned_efficiency", 0.0)])
def test_replace_rejects_non_positive_values(field, value):
    with pytest.raises(ValueError, match=field):
        ns.a2.replace(**{field: value})


def test_replace_rejects_efficiency_above_one_and_unknown_fields():
    with pytest.raises(ValueError, match="gm_unaligned_efficiency"):
        ns.a2.replace(gm_unaligned_efficiency=1.5)
    with pytest.raises(TypeError):
        ns.a2.replace(no_such_field=1)


def test_replaced_config_is_used_by_launch():
    tiny = ns.a2.replace(name="tiny-ub", ub_bytes=4 * KB)

    def k(x):
        pipe = ns.TPipe()
        q = ns.TQue(ns.TPosition.VECIN)
        pipe.init_buffer(q, 2, 4 * KB)

    import numpy as np
    x = np.zeros(16, np.float16)
    ns.launch(k, 1, x, config=ns.a2.replace(ub_bytes=8 * KB))
    with pytest.raises(ns.CapacityError, match="UB"):
        ns.launch(k, 1, x, config=tiny)


def test_str_and_rows_list_every_field():
    names = [f.name for f in dataclasses.fields(ns.HardwareConfig)]
    assert [k for k, _ in ns.a2.rows()] == names
    assert "192 KB" in str(ns.a2)
    assert "ub_bytes" in ns.a2._repr_html_()


def test_replace_rejects_non_integer_sizes():
    with pytest.raises((ValueError, TypeError), match="ub_bytes"):
        ns.a2.replace(ub_bytes=96e3)
    with pytest.raises((ValueError, TypeError), match="num_cores"):
        ns.a2.replace(num_cores="24")
