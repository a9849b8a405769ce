"""The ``torch_train_step`` case of ``npusim bench`` (lab 08's training step, simulated vs the memo)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import npusim.bench as bench  # noqa: E402
import npusim.torch as nt  # noqa: E402

pytestmark = pytest.mark.slow


def test_the_case_prints_both_figures_and_leaves_the_memo_on():
    bench.load()
    out = bench.CASES["torch_train_step"](1)   # asserts itself that both runs train alike
    assert "error" not in out and "skipped" not in out, out
    for dtype in ("fp32", "fp16"):
        fig = out[dtype]
        assert fig["simulated_s"] > 0 and fig["memo_s"] > 0 and fig["device_us"] > 0, fig
        assert fig["speed_up"] == pytest.approx(fig["simulated_s"] / fig["memo_s"], rel=0.1)
    assert out["sim_s"] == out["fp32"]["memo_s"]
    assert nt.options.memo is True
