"""The explorer_redraw benchmark case runs and reports its figures."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.views


def test_explorer_redraw_case_reports_median_ms():
    from npusim.bench import CASES
    import npusim.bench.views  # noqa: F401  (registers the case)

    out = CASES["explorer_redraw"](1)
    assert out["kernel"] == "explorer_redraw" and out["target_ms"] == 150
    assert out["changes"] >= 5 and out["redraw_ms"] > 0 and out["instructions"] > 0
    assert out["redraw_ms"] >= out["run_ms"]
