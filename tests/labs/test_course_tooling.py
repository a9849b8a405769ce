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


def _course(tmp_path, source="### BEGIN SOLUTION\nx = 1\n### END SOLUTION") -> Course:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "solutions").mkdir(exist_ok=True)
    cell = new_code_cell(source)
    cell["id"] = "c1"
    nbformat.write(new_notebook(cells=[cell]), tmp_path / "solutions" / "00_t.ipynb")
    return Course(tmp_path)


def test_check_reports_missing_stale_and_edited_labs(tmp_path):
    course = _course(tmp_path)
    lab = tmp_path / "labs" / "00_t.ipynb"
    assert any("missing" in p for p in course.problems())
    assert course.make().written == [lab]
    assert course.problems(strict=True) == []
    # the solution changes: an untouched lab is stale, and make regenerates it
    _course(tmp_path, "### BEGIN SOLUTION\nx = 2\n### END SOLUTION\nprint(x)")
    assert course.status(lab, course.expected()[lab]) == "stale"
    assert any("stale" in p for p in course.problems())
    assert course.make().written == [lab] and "print(x)" in lab.read_text()
    # a learner edits it: check says so, make refuses
    lab.write_text(lab.read_text().replace("YOUR CODE HERE", "my own words"))
    problems = course.problems()
    assert len(problems) == 1 and "edited" in problems[0] and "--force" in problems[0]
    report = course.make()
    assert report.refused == [lab] and not report.written and "my own words" in lab.read_text()


def test_a_lab_that_was_only_run_is_not_stale(tmp_path):
    course = _course(tmp_path)
    course.make()
    lab = tmp_path / "labs" / "00_t.ipynb"
    nb = nbformat.read(lab, as_version=4)
    nb.cells[0].outputs = [new_output("stream", text="ran")]
    nb.cells[0].execution_count = 1
    nb.cells[0].metadata["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00Z"}
    nb.cells[0].metadata["scrolled"] = True
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    nbformat.write(nb, lab)
    assert course.status(lab, course.expected()[lab]) == "ran"
    assert course.problems() == []                       # for a learner: nothing to do
    assert any("only by outputs" in p for p in course.problems(strict=True))   # CI: commit labs as generated
    assert course.make().written == [lab] and course.problems(strict=True) == []


def test_make_force_replaces_an_edited_lab_and_keeps_a_backup(tmp_path):
    course = _course(tmp_path)
    course.make()
    lab = tmp_path / "labs" / "00_t.ipynb"
    mine = lab.read_text().replace("YOUR CODE HERE", "my answer")
    lab.write_text(mine)
    report = course.make(force=True)
    assert report.written == [lab] and len(report.backups) == 1
    backup = report.backups[0]
    assert backup.parent == tmp_path / "labs" / ".backup" and backup.name.startswith("00_t-")
    assert backup.read_text() == mine and "my answer" not in lab.read_text()
    assert course.problems(strict=True) == []  # the backup folder holds no lab of its own


@pytest.mark.slow  # subprocesses of the CLI, each importing the package
def test_cli_make_names_the_refused_file_and_check_explains_outside_a_course(tmp_path):
    root = tmp_path / "course"
    root.mkdir()
    course = _course(root)
    course.make()
    lab = root / "labs" / "00_t.ipynb"
    lab.write_text(lab.read_text().replace("YOUR CODE HERE", "mine"))
    cli = [sys.executable, "-m", "npusim.cli", "labs"]
    proc = subprocess.run(cli + ["make", "--root", str(root)], capture_output=True, text=True)
    assert proc.returncode == 1 and "labs/00_t.ipynb" in proc.stderr and "--force" in proc.stderr
    assert "mine" in lab.read_text()
    elsewhere = tmp_path / "not-a-course"
    elsewhere.mkdir()
    proc = subprocess.run(cli + ["check"], capture_output=True, text=True, cwd=elsewhere)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "solutions/" in proc.stderr and "--root" in proc.stderr


@pytest.mark.slow  # subprocesses of the CLI, each importing the package
def test_every_subcommand_says_what_it_does():
    for cmd, words in (("start", "JupyterLab"), ("bench", "redraw_01_vector_add"), ("labs", "never overwritten"),
                       ("grade", "gradebook")):
        proc = subprocess.run([sys.executable, "-m", "npusim.cli", cmd, "--help"], capture_output=True, text=True,
                              cwd=ROOT)
        assert proc.returncode == 0 and words in proc.stdout, (cmd, proc.stdout)


@pytest.mark.slow  # subprocesses of the CLI, each importing the package
def test_repository_labs_are_current():
    """labs/ is byte for byte what `npusim labs make` generates from solutions/ (run it and commit if this
    fails)."""
    proc = subprocess.run([sys.executable, "-m", "npusim.cli", "labs", "check", "--strict", "--root", str(ROOT)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert Course(ROOT).notebooks(), "no solution notebooks found"
