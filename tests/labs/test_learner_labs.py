"""Each learner notebook, unsolved, runs cleanly up to its first exercise, and every check then fails with
the learner-facing CheckFailed message (never an error from inside the package)."""

from __future__ import annotations

from pathlib import Path

import pytest

from npusim.course.runner import run_notebook

ROOT = Path(__file__).resolve().parents[2]
LABS = sorted((ROOT / "labs").glob("*.ipynb"))
ALLOWED_AFTER_EXERCISE = {"NotImplementedError", "CheckFailed"}


def _param(path: Path):
    return pytest.param(path, id=path.stem, marks=[getattr(pytest.mark, f"lab{path.name[:2]}"), pytest.mark.labs,
                                                    pytest.mark.slow])


@pytest.mark.parametrize("lab", [_param(p) for p in LABS])
def test_unsolved_lab(lab: Path):
    results = run_notebook(lab, timeout=180)
    assert results, f"{lab.name} has no code cells"
    first_exercise = next((r.index for r in results if "raise NotImplementedError(" in r.source), None)
    assert first_exercise is not None, f"{lab.name} has no exercise"
    checks = [r for r in results if "check" in r.tags]
    assert checks, f"{lab.name} has no cell tagged 'check'"
    for r in results:
        where = f"{lab.name} cell {r.index} ({r.source.splitlines()[0][:60]!r})"
        assert r.status != "timeout", f"{where} timed out"
        if r.index < first_exercise:
            assert r.status == "ok", f"{where} failed before any exercise: {r.ename}: {r.evalue}"
        elif "check" in r.tags:
            assert r.status == "error" and r.ename == "CheckFailed", \
                f"{where}: an unsolved check must fail with CheckFailed, got {r.status} {r.ename}: {r.evalue}"
            assert "not finished" in r.evalue or "NotImplementedError" in r.evalue or "expected" in r.evalue, \
                f"{where}: the message does not tell the learner what to do: {r.evalue}"
            assert "site-packages" not in r.traceback and "/npusim/" not in r.traceback, \
                f"{where}: the learner sees a traceback from inside the package:\n{r.traceback}"
        else:
            assert r.status == "ok" or r.ename in ALLOWED_AFTER_EXERCISE, \
                f"{where} failed with {r.ename}: {r.evalue}"
