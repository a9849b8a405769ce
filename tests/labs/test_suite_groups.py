"""How the root conftest.py splits the suite between pytest-xdist workers (`-n`): what must share a process
does (a solution's nbval cells and the claims tests that read their outputs; a file's module fixtures; a
folder's session fixtures), and the rest is spread."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.labs


@pytest.fixture(scope="module")
def group():
    spec = importlib.util.spec_from_file_location("_root_conftest", ROOT / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.xdist_group


def test_solutions_and_the_claims_tests_share_one_group(group):
    # nbval's node ids of a notebook's cells, as xdist's controller sees them
    ids = [f"solutions/{p.stem}::ipynb::Cell 0" for p in sorted((ROOT / "solutions").glob("*.ipynb"))]
    ids += ["tests/labs/test_claims.py::test_claim[05_fp16:so K = 32]",
            "tests/labs/test_claims.py::test_every_number_in_the_prose_has_a_source[00_tour]"]
    assert len(ids) > 2 and {group(i) for i in ids} == {"solutions"}


def test_a_file_is_one_group_and_files_are_apart(group):
    a = "tests/grading/test_isolation.py::test_summary_per_learner"
    b = "tests/grading/test_isolation.py::test_copy_isolation_refuses_the_same_attacks"
    c = "tests/grading/test_hostile.py::test_every_mark_and_status_is_exact"
    assert group(a) == group(b) != group(c)


def test_a_folder_with_session_fixtures_is_one_group(group):
    assert group("tests/model/test_model_story.py::test_x") == group("tests/model/test_model_resnet.py::test_y")
    assert group("tests/views/test_views_bench.py::t") == group("tests/views/test_palette.py::t")


def test_the_unsolved_labs_run_all_is_split_by_lab_only(group):
    run = "tests/labs/test_learner_labs.py::{}[{}]"
    assert group(run.format("test_run_all_reaches_the_end", "08_torch")) == \
        group(run.format("test_no_tracebacks", "08_torch")) != group(run.format("test_no_tracebacks", "09_model"))
