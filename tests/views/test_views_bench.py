"""The bench has one redraw case per lab explorer, found from the notebooks, and reports its figures."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.views
ROOT = Path(__file__).resolve().parents[2]


def test_every_lab_with_an_explorer_has_a_redraw_case():
    import npusim.bench as bench

    cases = bench.load()
    labs = [p.stem for p in sorted((ROOT / "solutions").glob("*.ipynb")) if "Explorer(" in p.read_text()]
    assert len(labs) >= 9
    assert {f"redraw_{lab}" for lab in labs} <= set(cases)
    assert "redraw_01_vector_add" in bench.describe()


@pytest.mark.slow
def test_redraw_case_steps_every_control_and_reports_its_figures():
    from npusim.bench.explorers import redraw_case

    out = redraw_case(ROOT / "solutions" / "02_softmax.ipynb", repeat=1)
    assert "error" not in out, out
    assert out["kernel"] == "redraw_02_softmax" and out["target_ms"] == 150 and out["controls"] == ["cols", "tile"]
    # cols: its 4 other values and back (the cache was cleared, so all new); tile: its 6 other values, then
    # back to where it started (seen at the end of the cols walk: from the cache)
    assert out["changes"] + out["errors"] == 4 + 1 + 6 and out["revisits"] == 1
    assert out["redraw_ms"] >= out["run_ms"] and out["redraw_ms"] >= out["render_ms"] > 0
    assert out["cached_ms"] < out["redraw_ms"]
    assert out["meets_target"] == (out["redraw_ms"] <= 150)
