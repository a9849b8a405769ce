"""Every learner notebook, unsolved, runs top to bottom as Run All would: every code cell runs without an
error, every explorer appears (on the reference kernels where the learner's code is not written yet),
every check says in one message (one line, wrapped at 100 characters) that its exercise is not finished, and nothing shows a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from npusim.course.runner import run_notebook

ROOT = Path(__file__).resolve().parents[2]
LABS = sorted((ROOT / "labs").glob("*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"
MAX_STDERR_LINES = 8


def _param(path: Path):
    return pytest.param(path, id=path.stem, marks=[getattr(pytest.mark, f"lab{path.name[:2]}"), pytest.mark.labs,
                                                    pytest.mark.slow])


def _text(output: dict) -> str:
    if output["type"] == "stream":
        return output["text"]
    if output["type"] == "error":
        return "\n".join(output.get("traceback", []))
    return output.get("data", {}).get("text/plain", "")


@pytest.fixture(scope="module", params=[_param(p) for p in LABS])
def run(request):
    return request.param, run_notebook(request.param, timeout=180)


def test_run_all_reaches_the_end(run):
    lab, results = run
    assert results, f"{lab.name} has no code cells"
    assert any("raise NotImplementedError(" in r.source for r in results), f"{lab.name} has no exercise"
    for r in results:
        where = f"{lab.name} cell {r.index} ({r.source.splitlines()[0][:60]!r})"
        assert r.status == "ok", f"{where} stops Run All: {r.status} {r.ename}: {r.evalue}"
    assert len(results) == sum(1 for _ in _code_cells(lab)), f"{lab.name}: not every code cell ran"


def test_every_explorer_appears(run):
    lab, results = run
    explorers = [r for r in results if "Explorer(" in r.source]
    assert explorers, f"{lab.name} has no explorer"
    for r in explorers:
        assert any(WIDGET in o.get("data", {}) for o in r.outputs), \
            f"{lab.name} cell {r.index}: the explorer did not appear; outputs: {[_text(o)[:200] for o in r.outputs]}"


def test_checks_say_not_finished_in_one_message(run):
    lab, results = run
    checks = [r for r in results if "check" in r.tags]
    assert checks, f"{lab.name} has no cell tagged 'check'"
    for r in checks:
        shown = "".join(_text(o) for o in r.outputs).strip()
        assert "not finished yet" in shown, f"{lab.name} cell {r.index}: an unsolved check must say so: {shown!r}"
        # one message: its first line, and at most one continuation where it wraps at 100 characters
        lines = shown.splitlines()
        assert len(lines) <= 2 and all(ln.startswith("  ") for ln in lines[1:]), \
            f"{lab.name} cell {r.index}: more than one message: {shown!r}"
        assert "PASSED" not in shown, f"{lab.name} cell {r.index}: an unsolved check passed: {shown!r}"


def test_no_tracebacks(run):
    lab, results = run
    for r in results:
        for o in r.outputs:
            text = _text(o)
            where = f"{lab.name} cell {r.index}"
            assert "Traceback" not in text and "/npusim/" not in text and "site-packages" not in text, \
                f"{where} shows a traceback or the package's files:\n{text}"
            if o["type"] == "stream" and o["name"] == "stderr":
                assert len(text.splitlines()) <= MAX_STDERR_LINES, f"{where}: a long error output:\n{text}"


def _code_cells(lab: Path):
    import nbformat

    return [c for c in nbformat.read(lab, as_version=4).cells if c.cell_type == "code"]
