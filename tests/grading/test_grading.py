"""`npusim grade`: fabricated submissions (built from labs/ and solutions/) get exactly the expected marks,
stay byte-identical, and give a gradebook row and learner feedback even when they are broken."""

from __future__ import annotations

import contextlib
import copy
import csv
import hashlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from fabricate import COPY, PEAK, PREDICT, ROOT, TRY_COPY, class_of, lab, solve, solution, write
from npusim.cli import main as cli
from npusim.course.grading import (CellRun, RunResult, lab_from_ids, lab_from_name, learner_name, load_labs,
                                   restore_checks, score)

pytestmark = pytest.mark.grading

CELL_TIMEOUT = 30  # seconds (a loaded 2-core machine needs ~10 s for the first import); the endless loop costs two

# learner -> (lab, points per check, status)
EXPECTED = {
    "alice": ("01_vector_add", {"check-vector-add": 1, "check-vector-add-fast": 1, "check-block-range": 1}, "ok"),
    "bob": ("01_vector_add", {"check-vector-add": 0, "check-vector-add-fast": 0, "check-block-range": 0}, "ok"),
    "carol": ("00_tour", {"check-peak-tflops": 1, "check-copy-cycles": 0}, "ok"),
    "dave": ("01_vector_add", {"check-vector-add": 1, "check-vector-add-fast": 0, "check-block-range": 0}, "ok"),
    "erin": ("00_tour", {"check-peak-tflops": 0, "check-copy-cycles": 1}, "ok"),
    "frank": ("00_tour", {"check-peak-tflops": 1, "check-copy-cycles": 0}, "timeout"),
    "grace": ("01_vector_add", {"check-vector-add": 0, "check-vector-add-fast": 0, "check-block-range": 0},
              "invalid-notebook"),
    "heidi": ("00_tour", {"check-peak-tflops": 1, "check-copy-cycles": 0}, "kernel-died"),
    "ivan": ("00_tour", {"check-peak-tflops": 1, "check-copy-cycles": 1}, "ok"),
    "judy": ("00_tour", {"check-peak-tflops": 1, "check-copy-cycles": 0}, "ok"),
}
CHECKS = ["check-peak-tflops", "check-copy-cycles", "check-vector-add", "check-vector-add-fast", "check-block-range"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The whole fabricated class, graded once with `npusim grade ... --jobs 2`."""
    tmp = tmp_path_factory.mktemp("class")
    subs = class_of(tmp / "submissions")
    before = {p: _sha(p) for p in subs.values()}
    listing = sorted(os.listdir(tmp / "submissions"))
    out, fb = tmp / "gradebook.csv", tmp / "feedback"
    buf = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(buf):
        code = cli(["grade", *map(str, sorted(subs.values())), "--out", str(out), "--feedback-dir", str(fb),
                    "--jobs", "2", "--timeout", str(CELL_TIMEOUT), "--root", str(ROOT)])
    seconds = time.perf_counter() - t0
    print(buf.getvalue())  # one line per submission with its grading time (shown with -s or on failure)
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    with open(out, newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    return {"code": code, "subs": subs, "before": before, "listing": listing, "dir": tmp, "rows": rows,
            "header": header, "feedback": fb, "stdout": buf.getvalue(), "seconds": seconds}


@pytest.mark.slow  # grades the class (once, in the fixture)
def test_marks_are_exact(graded):
    assert graded["code"] == 0
    rows = {r["learner"]: r for r in graded["rows"]}
    assert sorted(rows) == sorted(EXPECTED), "one row per submission, none lost"
    for learner, (lab_name, points, status) in EXPECTED.items():
        row = rows[learner]
        got = {c: int(row[c]) for c in points}
        assert (row["lab"], got, row["status"]) == (lab_name, points, status), (learner, row)
        assert int(row["total"]) == sum(points.values()) and int(row["max"]) == len(points), row
        other = set(CHECKS) - set(points)
        assert all(row[c] == "" for c in other), f"{learner}: checks of another lab must stay blank"


@pytest.mark.slow  # grades the class (once, in the fixture)
def test_submissions_are_byte_identical_afterwards(graded):
    for path, digest in graded["before"].items():
        assert _sha(path) == digest, f"{path.name} was modified"
    assert sorted(os.listdir(graded["dir"] / "submissions")) == graded["listing"], "nothing written beside them"


@pytest.mark.slow  # grades the class (once, in the fixture)
def test_gradebook_columns(graded):
    assert graded["header"] == ["learner", "lab", "file", *CHECKS, "total", "max", "status", "reason", "flags", "seconds"]
    for row in graded["rows"]:
        assert float(row["seconds"]) < 6 * CELL_TIMEOUT, row   # the endless loop was stopped


@pytest.mark.slow  # grades the class (once, in the fixture)
def test_reasons_in_the_gradebook(graded):
    reason = {r["learner"]: r["reason"] for r in graded["rows"]}
    assert reason["alice"] == "" and reason["bob"] == ""
    assert f"did not finish within the {CELL_TIMEOUT} s cell time limit" in reason["frank"]
    assert "kernel stopped" in reason["heidi"] and "crash-cell" in reason["heidi"]
    assert "not valid JSON" in reason["grace"]
    assert "100.0 million characters" in reason["ivan"] and "huge-output" in reason["ivan"]
    assert "`check-vector-add-fast` was missing" in reason["dave"]
    assert "`check-peak-tflops` had been changed" in reason["erin"]


@pytest.mark.slow  # grades the class (once, in the fixture)
def test_progress_lines_give_each_grading_time(graded):
    lines = [line for line in graded["stdout"].splitlines() if line.rstrip().endswith(".ipynb")]
    assert len(lines) == len(EXPECTED)
    assert all(" s  " in line for line in lines)
    assert "graded 10 submission(s)" in graded["stdout"]


@pytest.mark.slow  # grades the class (once, in the fixture)
def test_feedback_holds_the_learner_facing_messages(graded):
    fb = graded["feedback"]
    files = sorted(p.stem for p in fb.glob("*.md"))
    assert files == sorted(EXPECTED), "one feedback file per learner"
    text = {p.stem: p.read_text(encoding="utf-8") for p in fb.glob("*.md")}
    assert "[vector_add] on [total=1, tile=256, block_dim=1, buffer_num=1, dtype=float16] all 1 elements are wrong" in text["bob"]
    assert "y's tile is copied from x" not in text["bob"] and "x's tile is copied from y" in text["bob"]
    assert "[copy_cycles] not finished yet" in text["carol"]
    assert "[vector_add_fast] not finished yet" in text["dave"]
    assert "[peak_tflops] for the config 'a2'" in text["erin"] and "got 7.3728" in text["erin"]
    assert "NameError: name 'copy_cycles' is not defined" in text["judy"]
    assert f"did not finish within the {CELL_TIMEOUT} s cell time limit" in text["frank"]
    assert "kernel" in text["heidi"] and "1 of 2 points" in text["heidi"]
    assert "3 of 3 points" in text["alice"] and "PASSED vector_add_fast" in text["alice"]
    for learner, body in text.items():
        assert "Traceback" not in body, learner
        assert "site-packages" not in body and "/npusim/" not in body and 'File "' not in body, learner
        assert "\x1b[" not in body, learner


def test_check_cells_are_restored_at_their_place():
    base = solve(lab("00_tour"), "00_tour", PEAK, COPY, PREDICT)
    labs = load_labs(ROOT)
    tour = labs["00_tour"]
    order = [c["id"] for c in base.cells]

    deleted = copy.deepcopy(base)
    del deleted.cells[order.index("check-copy-cycles")]
    restored, notes = restore_checks(deleted, tour)
    assert [c["id"] for c in restored.cells] == order and "was missing" in notes[0]
    assert len(deleted.cells) == len(order) - 1, "the submission itself is untouched"

    # the check and the cell before it are gone: it goes after the nearest earlier cell that is left
    gone = copy.deepcopy(base)
    for cid in ("check-copy-cycles", TRY_COPY):
        del gone.cells[[c["id"] for c in gone.cells].index(cid)]
    restored, _ = restore_checks(gone, tour)
    ids = [c["id"] for c in restored.cells]
    assert ids.index("check-copy-cycles") == ids.index(order[order.index(TRY_COPY) - 1]) + 1

    edited = copy.deepcopy(base)
    cell = edited.cells[order.index("check-peak-tflops")]
    cell.source, cell.cell_type = "pass", "markdown"
    cell.metadata["tags"] = ["raises-exception"]
    restored, notes = restore_checks(edited, tour)
    cell = restored.cells[order.index("check-peak-tflops")]
    assert (cell.cell_type, cell.source, cell.metadata["tags"]) == ("code", "check.peak_tflops(peak_tflops)",
                                                                    ["check"])
    assert any("had been changed" in n for n in notes)
    assert all(c.get("outputs", []) == [] for c in restored.cells if c.cell_type == "code")


def test_a_notebook_without_cell_ids_gets_the_checks_at_its_end():
    old = solution("00_tour")
    for cell in old.cells:
        cell.pop("id", None)
    restored, notes = restore_checks(old, load_labs(ROOT)["00_tour"])
    assert [c.get("id") for c in restored.cells[-2:]] == ["check-peak-tflops", "check-copy-cycles"]
    assert len(restored.cells) == len(old.cells) + 2 and notes == [notes[0]] and "no cell ids" in notes[0]


def test_points_from_solution_metadata(tmp_path):
    (tmp_path / "solutions").mkdir()
    sol = solution("00_tour")
    next(c for c in sol.cells if c.get("id") == "check-copy-cycles").metadata["points"] = 3
    write(sol, tmp_path / "solutions" / "00_tour.ipynb")
    tour = load_labs(tmp_path)["00_tour"]
    assert [(c.id, c.points) for c in tour.checks] == [("check-peak-tflops", 1), ("check-copy-cycles", 3)]
    assert tour.max_points == 4
    nb, _ = restore_checks(lab("00_tour"), tour)
    code_ids = [c["id"] for c in nb.cells if c.cell_type == "code"]
    n_peak, n_copy = code_ids.index("check-peak-tflops"), code_ids.index("check-copy-cycles")
    run = RunResult({n_peak: CellRun(n_peak, "failed", "CheckFailed", "[peak_tflops] not finished yet"),
                     n_copy: CellRun(n_copy, "passed", passed_line="PASSED copy_cycles: 5 copies")},
                    junit_found=True, logged=2)
    checks, status, _, _ = score(tour, nb, run, 10, 100)
    assert [(c.id, c.points, c.max_points) for c in checks] == [("check-peak-tflops", 0, 1),
                                                                 ("check-copy-cycles", 3, 3)]
    assert status == "ok" and checks[0].message == "[peak_tflops] not finished yet"


def test_a_pass_needs_the_passed_line():
    tour = load_labs(ROOT)["00_tour"]
    nb, _ = restore_checks(solution("00_tour"), tour)
    code_ids = [c["id"] for c in nb.cells if c.cell_type == "code"]
    cells = {code_ids.index(c.id): CellRun(code_ids.index(c.id), "passed") for c in tour.checks}
    checks, *_ = score(tour, nb, RunResult(cells, junit_found=True, logged=len(cells)), 10, 100)
    assert [c.points for c in checks] == [0, 0] and "PASSED line" in checks[0].message


def test_a_kernel_that_never_started_is_the_graders_problem():
    tour = load_labs(ROOT)["00_tour"]
    nb, _ = restore_checks(solution("00_tour"), tour)
    n = sum(c.cell_type == "code" for c in nb.cells)
    run = RunResult({i: CellRun(i, "failed") for i in range(n)}, returncode=1, junit_found=True, logged=0,
                    log_tail="RuntimeError: Kernel died before replying to kernel_info")
    checks, status, reasons, notes = score(tour, nb, run, 10, 100)
    assert status == "grader-error" and "Kernel died before replying" in reasons[0]
    assert [c.points for c in checks] == [0, 0] and "grading side" in notes[0]


def test_learner_and_lab_from_the_file():
    labs = load_labs(ROOT)
    assert learner_name(Path("subs/alice_01_vector_add.ipynb"), "01_vector_add") == "alice"
    assert learner_name(Path("subs/01_vector_add-bob.ipynb"), "01_vector_add") == "bob"
    assert learner_name(Path("subs/carol/01_vector_add.ipynb"), "01_vector_add") == "carol"
    assert learner_name(Path("subs/dave.ipynb"), "00_tour") == "dave"
    assert lab_from_name(Path("x/alice_01_vector_add.ipynb"), labs).name == "01_vector_add"
    assert lab_from_name(Path("x/alice.ipynb"), labs) is None
    assert lab_from_ids(lab("02_softmax"), labs).name == "02_softmax"
    assert lab_from_ids(nbformat.v4.new_notebook(), labs) is None


def test_unreadable_submissions_still_get_a_row(tmp_path):
    """Through the installed command, in a subprocess: nothing here starts a kernel."""
    unknown = tmp_path / "kim.ipynb"
    write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), unknown)
    empty = tmp_path / "lee_03_matmul.ipynb"
    empty.write_bytes(b"")
    not_nb = tmp_path / "max_02_softmax.ipynb"
    not_nb.write_text('{"hello": "world"}', encoding="utf-8")
    missing = tmp_path / "nobody_00_tour.ipynb"
    out = tmp_path / "gb.csv"
    proc = subprocess.run([sys.executable, "-m", "npusim.cli", "grade", str(unknown), str(empty), str(not_nb),
                           str(missing), "--out", str(out), "--feedback-dir", str(tmp_path / "fb")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {r["learner"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert (rows["kim"]["status"], rows["kim"]["lab"]) == ("unknown-lab", "")
    assert (rows["lee"]["status"], rows["lee"]["lab"], rows["lee"]["max"]) == ("invalid-notebook", "03_matmul", "2")
    assert rows["max"]["status"] == "invalid-notebook" and "not a notebook" in rows["max"]["reason"]
    assert rows["nobody"]["status"] == "missing-file"
    assert sorted(p.stem for p in (tmp_path / "fb").glob("*.md")) == ["kim", "lee", "max", "nobody"]


def _left_behind(sandboxes) -> list[int]:
    """Processes still running whose environment names one of these submissions' homes. Only this run's
    sandboxes count: other grading runs may be going on on the same machine."""
    needles = [f"HOME={sb.home}".encode() for sb in sandboxes]
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(n in env for n in needles):
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to look for leftover kernels")
def test_notebook_wall_clock_limit_kills_everything(tmp_path, monkeypatch):
    from npusim.course.grading import sandbox as sandbox_mod

    made = []
    init = sandbox_mod.Sandbox.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(sandbox_mod.Sandbox, "__init__", spy)
    nb = solve(lab("00_tour"), "00_tour", PEAK)
    next(c for c in nb.cells if c.get("id") == COPY).source = "import time\nwhile True:\n    time.sleep(0.1)"
    path = write(nb, tmp_path / "olga_00_tour.ipynb")
    digest = _sha(path)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        cli(["grade", str(path), "--out", str(tmp_path / "gb.csv"), "--feedback-dir", str(tmp_path / "fb"),
             "--timeout", "120", "--notebook-timeout", "45", "--root", str(ROOT)])
    row = next(csv.DictReader((tmp_path / "gb.csv").open(encoding="utf-8")))
    assert row["status"] == "notebook-timeout" and "45 s" in row["reason"]
    # exercise 1's check had passed before the limit (read from what the grader logged as cells ran)
    assert (row["check-peak-tflops"], row["check-copy-cycles"], row["total"]) == ("1", "0", "1")
    assert float(row["seconds"]) < 90
    assert _sha(path) == digest
    time.sleep(0.5)
    assert made, "the submission ran in a sandbox"
    assert _left_behind(made) == [], "a kernel or pytest of the grader outlived its wall-clock limit"
