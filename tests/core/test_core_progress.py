"""A long launch says how far it has got (``progress=``), in the terminal here; the simulated numbers do
not depend on it."""

import numpy as np
import pytest

import npusim as ns
from npusim import ops
from npusim.progress import LaunchProgress

pytestmark = pytest.mark.core


def test_progress_true_draws_a_line_and_a_closing_line(capsys, monkeypatch):
    monkeypatch.setattr(LaunchProgress, "EVERY", 1)
    monkeypatch.setattr(LaunchProgress, "REDRAW_S", 0.0)
    a = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float16)
    shown = ops.call("matmul", a, a, progress=True)
    err = capsys.readouterr().err
    assert "simulated" in err and "blocks done" in err
    last = err.rstrip().rsplit("\r", 1)[-1]
    assert f"done, {shown.profile.time_us:.1f} us simulated" in last
    # the line names the call the learner wrote, not the operator's internal kernel function
    assert last.startswith('ops.call("matmul", 256x256, 256x256) on ') and "_matmul" not in err
    quiet = ops.call("matmul", a, a, progress=False)
    assert capsys.readouterr().err == ""
    assert quiet.profile.total_cycles == shown.profile.total_cycles
    assert quiet.profile.block_end_cycles == shown.profile.block_end_cycles


def test_a_short_launch_stays_silent_by_default(capsys):
    x = np.ones(4096, np.float16)
    ns.launch(lambda x: None, 1, x)
    assert capsys.readouterr().err == ""


def test_one_core_launch_ticks_from_its_dmas(capsys, monkeypatch):
    monkeypatch.setattr(LaunchProgress, "EVERY", 1)
    monkeypatch.setattr(LaunchProgress, "REDRAW_S", 0.0)
    x = np.random.default_rng(0).random(1 << 16).astype(np.float16)
    one = ns.a2.replace(name="a2-1aiv", num_cores=1, aiv_per_core=1)   # one vector core: blocks in sequence
    r = ops.call("add", x, x, config=one, progress=True)
    assert r.profile.active_cores == 1
    err = capsys.readouterr().err
    assert err.count("blocks done") >= 2
