"""Every check passes its lab's solution and rejects each wrong solution of its corpus, with a message
that names the real cause (``tests/labs/labcorpus/labNN.py``)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from npusim.checks import CheckFailed

from labcorpus import harness  # noqa: E402  (tests/labs is on sys.path: rootdir-relative import)

CORPORA = [importlib.import_module(f"labcorpus.{m.name}")
           for m in pkgutil.iter_modules([str(harness.ROOT / "tests" / "labs" / "labcorpus")])
           if m.name.startswith("lab")]
MIN_WRONG_PER_CHECK = 3


SLOW_LABS = ("08", "09")  # their checks run PyTorch models on the simulator: several seconds each


def _marks(mod):
    slow = [pytest.mark.slow] if mod.LAB[:2] in SLOW_LABS else []
    return [getattr(pytest.mark, f"lab{mod.LAB[:2]}"), pytest.mark.labs, *slow]


def _solutions():
    for mod in CORPORA:
        for check, cells in mod.CHECKS.items():
            yield pytest.param(mod, check, cells, id=f"{mod.LAB[:2]}-{check}", marks=_marks(mod))


def _wrongs():
    for mod in CORPORA:
        for w in mod.WRONG:
            yield pytest.param(mod, w, id=f"{mod.LAB[:2]}-{w.name}", marks=_marks(mod))


@pytest.mark.parametrize("mod, check, cells", list(_solutions()))
def test_solution_passes(mod, check, cells):
    printed = harness.run_check(mod.LAB, cells, check)
    assert "PASSED" in printed, f"{check} did not print its PASSED line: {printed!r}"


@pytest.mark.parametrize("mod, wrong", list(_wrongs()))
def test_wrong_solution_is_rejected(mod, wrong):
    with pytest.raises(CheckFailed) as info:
        printed = harness.run_check(mod.LAB, mod.CHECKS[wrong.check], wrong.check, wrong)
        pytest.fail(f"{wrong.name} ({wrong.why}) was accepted: {printed!r}")
    message = str(info.value).lower()
    for kw in wrong.keywords:
        assert kw.lower() in message, f"{wrong.name}: the message does not say {kw!r}:\n{info.value}"


@pytest.mark.parametrize("mod", [pytest.param(m, id=m.LAB[:2], marks=_marks(m)) for m in CORPORA])
def test_every_check_has_a_corpus(mod):
    counts = {c: sum(1 for w in mod.WRONG if w.check == c) for c in mod.CHECKS}
    thin = {c: n for c, n in counts.items() if n < MIN_WRONG_PER_CHECK}
    assert not thin, f"{mod.LAB}: checks with fewer than {MIN_WRONG_PER_CHECK} wrong solutions: {thin}"


def test_every_lab_check_is_covered():
    import nbformat

    covered = {(m.LAB, c) for m in CORPORA for c in m.CHECKS}
    for sol in sorted((harness.ROOT / "solutions").glob("*.ipynb")):
        nb = nbformat.read(sol, as_version=4)
        for cell in nb.cells:
            if "check" in cell.get("metadata", {}).get("tags", []):
                assert (sol.stem, cell.id) in covered, f"{sol.name}: {cell.id} has no wrong-solution corpus"
