"""`npusim labs make/check`: learner notebooks are generated from solutions and kept current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from npusim.course.notebooks import Course, SolutionMarkupError, make_lab, strip_code

pytestmark = pytest.mark.labs
ROOT = Path(__file__).resolve().parents[2]


def test_strip_code_keeps_indentation_and_hint():
    src = "def f(x):\n    ### BEGIN SOLUTION: return twice x\n    y = 2 * x\n    return y\n    ### END SOLUTION\n"
    out = strip_code(src)
    assert "2 * x" not in out
    assert "    # YOUR CODE HERE: return twice x\n    raise NotImplementedError('return twice x')" in out
    assert out.startswith("def f(x):\n")


def test_strip_code_rejects_unpaired_markers():
    with pytest.raises(SolutionMarkupError):
        strip_code("### BEGIN SOLUTION\nx = 1\n")
    with pytest.raises(SolutionMarkupError):
        strip_code("x = 1\n### END SOLUTION\n")


def test_make_lab_clears_outputs_keeps_ids_and_tags():
    code = new_code_cell("### BEGIN SOLUTION\nanswer = 42\n### END SOLUTION\ncheck(answer)",
                         execution_count=3, outputs=[new_output("stream", text="hi")])
    code["id"] = "ex-1"
    code.metadata["tags"] = ["check"]
    md = new_markdown_cell("Question\n<!-- BEGIN SOLUTION -->\nThe answer is 42.\n<!-- END SOLUTION -->\nEnd")
    md["id"] = "md-1"
    only = new_code_cell("secret = 1")
    only.metadata["tags"] = ["solution-only"]
    nb = new_notebook(cells=[md, code, only])
    lab = make_lab(nb)
    assert [c["id"] for c in lab.cells] == ["md-1", "ex-1"]
    assert lab.cells[1].outputs == [] and lab.cells[1].execution_count is None
    assert lab.cells[1].metadata["tags"] == ["check"]
    assert "42" not in lab.cells[1].source and "check(answer)" in lab.cells[1].source
    assert "42" not in lab.cells[0].source and lab.cells[0].source.endswith("End")
    assert nb.cells[1].outputs  # the solution itself is untouched


def test_check_reports_a_stale_lab(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "solutions").mkdir()
    cell = new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION")
    cell["id"] = "c1"
    nbformat.write(new_notebook(cells=[cell]), tmp_path / "solutions" / "00_t.ipynb")
    course = Course(tmp_path)
    assert any("missing" in p for p in course.problems())
    course.make()
    assert course.problems() == []
    lab = tmp_path / "labs" / "00_t.ipynb"
    lab.write_text(lab.read_text().replace("YOUR CODE HERE", "edited"))
    assert any("stale" in p for p in course.problems())


def test_repository_labs_are_current():
    """labs/ equals what `npusim labs make` generates from solutions/ (run it and commit if this fails)."""
    proc = subprocess.run([sys.executable, "-m", "npusim.cli", "labs", "check", "--root", str(ROOT)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert Course(ROOT).notebooks(), "no solution notebooks found"
