"""Test-session setup shared by package tests and notebook runs (nbval on solutions/)."""

from __future__ import annotations

import os
import re

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")  # in-process tests draw without a display
# The Cube's numerics are many small float64 matmuls: BLAS threads only contend on a 2-core machine
# (measured 30-100x slower per Mmad under load). Notebook kernels started by the tests inherit this.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Checks raise CheckFailed (instead of printing and letting the notebook go on), so that nbval on solutions/
# and the in-process check tests fail on a failing check. The unsolved-lab runner turns it off.
os.environ["NPUSIM_STRICT"] = "1"

_LAB = re.compile(r"^(\d\d)_")

# the generated learner notebooks (labs/) are tested by tests/labs, not collected as tests themselves (a
# norecursedirs entry "labs" would also skip tests/labs: it matches folder names anywhere)
collect_ignore = ["labs"]


def pytest_configure(config):
    config._npusim_solved_outputs = {}  # lab -> what its solved cells printed (tests/labs/test_claims.py)


def pytest_runtest_teardown(item):
    # keep what nbval's run of a solution printed, so that the claims test reads the same run
    outputs = getattr(item, "test_outputs", None)
    if outputs is not None:
        from npusim.course.claims import outputs_text
        kept = item.config._npusim_solved_outputs
        stem = os.path.basename(str(item.fspath)).removesuffix(".ipynb")
        kept[stem] = kept.get(stem, "") + "\n" + outputs_text(outputs)


def pytest_collection_modifyitems(config, items):
    # the claims test reads the solutions' outputs: it runs after them
    items.sort(key=lambda item: "test_claims.py" in str(getattr(item, "path", "") or item.fspath))
    # nbval items of solutions/NN_*.ipynb get the lab's marker (e.g. -m lab01) and "labs"
    for item in items:
        path = str(getattr(item, "path", "") or item.fspath)
        if path.endswith(".ipynb"):
            m = _LAB.match(os.path.basename(path))
            if m:
                item.add_marker(getattr(pytest.mark, f"lab{m.group(1)}"))
            item.add_marker(pytest.mark.labs)
