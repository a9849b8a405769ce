"""The model-level profile: the timeline rules, the breakdown, transfers, the metrics' definitions."""

from __future__ import annotations

import numpy as np
import pytest

from npusim import model as nm
from npusim.model.metrics import ModelProfile
from npusim.model.schedule import Event

pytestmark = pytest.mark.lab09


def test_breakdown_sums_to_the_model_time(before, after):
    for p in (before, after):
        b = p.breakdown_us
        assert set(b) == set(nm.CATEGORIES) and min(b.values()) >= 0
        assert sum(b.values()) == pytest.approx(p.model_time_us, rel=1e-12)
        assert b["device"] == pytest.approx(p.device_compute_us)  # kernels win every instant they run
        assert b["transfers"] == pytest.approx(p.transfer_us)     # copies are synchronous: never hidden
        assert b["host"] == pytest.approx(p.host_us)
        assert b["launch"] <= p.launch_us + 1e-9


def test_breakdown_priority_on_a_handmade_timeline(graph):
    evs = [Event("launch", "l1", "a", 0, 20), Event("kernel", "k1", "a", 20, 30),
           Event("launch", "l2", "b", 20, 40), Event("kernel", "k2", "b", 40, 41),
           Event("d2h", "d", "c", 45, 55, 100), Event("host", "h", "c", 55, 60)]
    p = ModelProfile(graph, nm.DEFAULT_SYSTEM, evs, np.zeros(1))
    assert p.model_time_us == 60
    assert p.breakdown_us == {"device": 11, "transfers": 10, "host": 5, "launch": 30, "idle": 4}


def test_all_on_device_means_one_upload_one_download(after, batch):
    assert (after.uploads, after.downloads) == (1, 1)
    out_bytes = after.output.nbytes
    assert after.transfer_bytes == batch.astype(np.float16).nbytes + out_bytes
    assert after.host_us == 0 and after.breakdown_us["host"] == 0


def test_transfers_of_the_fallback_graph(before, graph):
    # x up; per host op its input down and its output up again where a device op reads it; pool2 is
    # read by conv3 and by the residual add but uploaded once; the result comes down at the end
    assert (before.uploads, before.downloads) == (7, 7)
    ups = [e.tensor for e in before.events if e.kind == "h2d"]
    assert ups == ["x", "bn1", "pool1", "bn2", "pool2", "bn3", "flatten"]
    sizes = {e.tensor: e.nbytes for e in before.events if e.kind == "h2d"}
    assert sizes["x"] == 4 * 3 * 32 * 32 * 2 and sizes["pool2"] == 4 * 32 * 8 * 8 * 2
    sys = before.system
    for e in before.events:
        if e.kind in ("h2d", "d2h"):
            assert e.dur_us == pytest.approx(sys.pcie_latency_us + e.nbytes / sys.pcie_bytes_per_s * 1e6)


def test_timeline_rules(before):
    evs = before.events
    kernels = before.kernels()
    launches = [e for e in evs if e.kind == "launch"]
    assert len(kernels) == len(launches) == before.launches
    for l, k in zip(launches, kernels):
        assert l.name == k.name and k.start_us >= l.end_us - 1e-9
        assert l.dur_us == pytest.approx(before.system.launch_overhead_us)
        assert k.dur_us == pytest.approx(k.profile.time_us)
    for a, b in zip(kernels, kernels[1:]):
        assert b.start_us >= a.end_us - 1e-9  # one stream
    host_side = sorted((e for e in evs if e.kind != "kernel"), key=lambda e: e.start_us)
    for a, b in zip(host_side, host_side[1:]):
        assert b.start_us >= a.end_us - 1e-9  # one host thread
    assert before.model_time_us == max(e.end_us for e in evs) and evs[-1].kind == "d2h"


def test_model_utilisation_is_far_below_the_kernels(before, after):
    convs = [r for r in before.op_rows() if r["op"] == "conv2d"]
    assert len(convs) == 3
    for r in convs:
        assert 0 < r["op_util"] < r["kernel_chip_util"] <= r["kernel_util"]
        assert r["kernel_chip_util"] == pytest.approx(r["kernel_util"] * r["cores"] / nm.DEFAULT_SYSTEM.hardware.num_cores)
        assert r["kernel_chip_util"] > 10 * before.mac_utilization
    assert before.cube_ideal_us == pytest.approx(after.cube_ideal_us, rel=1e-2)  # same useful work
    assert after.mac_utilization > before.mac_utilization
    assert after.model_time_us < before.model_time_us / 1.4


def test_one_kernel_alone_has_its_chip_utilisation(graph):
    p0 = nm.run_model(nm.optimize(graph), nm.images(1)).kernels("conv1")
    main = next(e for e in p0 if e.main)
    only = Event("kernel", main.name, "conv1", 0.0, main.profile.time_us, profile=main.profile, main=True)
    p = ModelProfile(graph, nm.DEFAULT_SYSTEM, [only], np.zeros(1))
    assert p.mac_utilization == pytest.approx(main.profile.chip_mac_utilization)
    assert main.profile.chip_mac_utilization == pytest.approx(
        main.profile.mac_utilization * main.profile.active_cores / main.profile.chip_cores)


def test_batch_size_grows_copies_and_host_not_launches(graph):
    small, big = (nm.run_model(graph, nm.images(b)) for b in (1, 8))
    assert big.launches == small.launches
    assert big.transfer_bytes == 8 * small.transfer_bytes
    assert big.host_us > small.host_us


def test_summary_and_metric_docs(before):
    text = before.summary()
    assert "model time" in text and "kernel launch" in text
    assert "conv1" in before.op_table() and before._repr_html_().startswith("<table")
    docs = nm.metric_docs()
    for key in ("model_time_us", "mac_utilization", "breakdown_us", "cube_ideal_us", "device_busy_ratio"):
        assert docs[key]
    m = before.metrics()
    assert m["model_time_us"] == before.model_time_us and m["launches"] == before.launches


def test_system_config_is_validated_and_used(graph):
    with pytest.raises(ValueError):
        nm.SystemConfig(pcie_bytes_per_s=0)
    fast = nm.SystemConfig().replace(pcie_latency_us=0.0, pcie_bytes_per_s=1e12)
    p = nm.run_model(graph, nm.images(1), fast)
    assert p.transfer_us < 1.0
