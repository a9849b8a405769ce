"""Test-session setup shared by package tests and notebook runs (nbval on solutions/)."""

from __future__ import annotations

import os
import re
import sys

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


@pytest.fixture(autouse=True)
def _no_figure_left_open():
    """Each test starts without pyplot figures: tests that run notebook cells in-process leave the cells'
    figures open (plt.show does nothing under Agg), and which test runs next in the same process depends on
    how the run is split (``-n``). Closed after the test's own fixtures, so that tests/views' leak check
    still sees a figure its test leaves."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


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
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: hand out the long groups first
        _heavy_groups_first(items)
    # nbval items of solutions/NN_*.ipynb get the lab's marker (e.g. -m lab01) and "labs"
    for item in items:
        path = str(getattr(item, "path", "") or item.fspath)
        if path.endswith(".ipynb"):
            m = _LAB.match(os.path.basename(path))
            if m:
                item.add_marker(getattr(pytest.mark, f"lab{m.group(1)}"))
            item.add_marker(pytest.mark.labs)


# --- pytest-xdist (`-n 2`): which tests share a worker ------------------------------------------------------
# A group runs in one worker, in collection order. By default a group is a test file, so that module-scoped
# fixtures (a class graded once, a notebook run once) are computed once. nbval runs each solution's cells in
# order in one kernel, and the claims tests read what those runs printed (config._npusim_solved_outputs
# above, kept per process): solutions/ and test_claims.py are one group.
_SOLUTIONS_GROUP = ("solutions/", "tests/labs/test_claims.py")
# folders whose conftest.py has session fixtures (a model run, profiles): one group, so computed once
_ONE_GROUP_PER_FOLDER = ("tests/model/", "tests/views/")
# files whose module-scoped fixtures are per parameter: one group per parameter (e.g. one lab's Run All)
_SPLIT_BY_PARAMETER = ("tests/labs/test_learner_labs.py",)


def xdist_group(nodeid: str) -> str:
    """The group of a test (by its node id, which is all the xdist controller sees)."""
    path, _, rest = nodeid.partition("::")
    if path.startswith(_SOLUTIONS_GROUP):
        return "solutions"
    for folder in _ONE_GROUP_PER_FOLDER:
        if path.startswith(folder):
            return folder
    if path in _SPLIT_BY_PARAMETER and "[" in rest:
        return f"{path}[{rest.split('[', 1)[1]}"
    return path


def _heavy_groups_first(items) -> None:
    """Groups holding a ``slow`` or nbval test first (most tests first), the rest after in their order: the
    last groups handed out are short, so both workers finish at about the same time. Every worker sorts
    the same way (xdist requires identical collections)."""
    count: dict[str, int] = {}
    heavy: set[str] = set()
    for item in items:
        group = xdist_group(item.nodeid)
        count[group] = count.get(group, 0) + 1
        if item.get_closest_marker("slow") or str(getattr(item, "path", "")).endswith(".ipynb"):
            heavy.add(group)
    items.sort(key=lambda item: (0, -count[g]) if (g := xdist_group(item.nodeid)) in heavy else (1, 0))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    # whatever --dist says: any other split would break nbval's in-order cells and the claims tests
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    config.option.loadscopereorder = False  # keep the workers' order (heavy groups first), not by test count
    return GroupScheduling(config, log)
