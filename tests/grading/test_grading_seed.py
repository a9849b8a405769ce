"""`npusim grade` with two different secret seeds grades the same correct notebooks fully both times, and
the checks' random hidden inputs differ between the two runs (the fixed adversarial ones do not)."""

from __future__ import annotations

import contextlib
import csv
import io
import json

import pytest

from fabricate import ROOT, ran, solution, write
from npusim.checks import lab01_vector_add as lab01
from npusim.checks import lab02_softmax as lab02
from npusim.cli import main as cli

pytestmark = [pytest.mark.grading, pytest.mark.slow]
SEEDS = (1111, 2222)
LABS = ("01_vector_add", "02_softmax")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("seeds")
    subs = [write(ran(solution(name)), base / f"ann_{name}.ipynb") for name in LABS]
    out = {}
    for seed in SEEDS:
        folder = base / f"seed-{seed}"
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli(["grade", *map(str, subs), "--out-dir", str(folder), "--root", str(ROOT), "--jobs", "2",
                        "--seed", str(seed)])
        rows = list(csv.DictReader((folder / "gradebook.csv").open(encoding="utf-8")))
        out[seed] = (code, rows, json.loads((folder / "run.json").read_text(encoding="utf-8")))
    return out


def test_a_correct_notebook_scores_fully_under_every_seed(graded):
    for seed, (code, rows, run) in graded.items():
        assert code == 0 and run["seed"] == seed
        assert sorted(r["lab"] for r in rows) == sorted(LABS)
        for r in rows:
            assert r["status"] == "ok" and int(r["total"]) == int(r["max"]) > 0, (seed, r)


def test_the_random_hidden_inputs_differ_between_the_seeds(monkeypatch):
    cases = {}
    for seed in SEEDS:
        monkeypatch.setenv("NPUSIM_CHECK_SEED", str(seed))
        cases[seed] = (lab01._add_cases(), lab02._cases())
    (add_a, soft_a), (add_b, soft_b) = cases[SEEDS[0]], cases[SEEDS[1]]
    fixed_add, fixed_soft = len(lab01._ADD_FIXED), len(lab02._FIXED)
    assert add_a[:fixed_add] == add_b[:fixed_add] and soft_a[:fixed_soft] == soft_b[:fixed_soft]
    assert add_a[fixed_add:] != add_b[fixed_add:] and soft_a[fixed_soft:] != soft_b[fixed_soft:]
