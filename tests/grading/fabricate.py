"""Fabricated learner submissions, built from labs/ and solutions/ as a learner's Jupyter would save them."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

ROOT = Path(__file__).resolve().parents[2]

# cell ids of the exercises (see solutions/)
PEAK, COPY = "00_tou-902ba3cd", "00_tou-9e6a55b6"            # lab 00: peak_tflops, copy_cycles
ADD, ADD_FAST = "01_vec-c1dfd96e", "01_vec-f1abd670"         # lab 01: MyKernelAdd + add_kernel, add_kernel_fast


def lab(name: str):
    """The learner version of a lab, unsolved."""
    return nbformat.read(ROOT / "labs" / f"{name}.ipynb", as_version=4)


def solution(name: str):
    return nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)


def index(nb, cell_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.get("id") == cell_id)


def solve(nb, name: str, *cell_ids: str):
    """``nb`` with the given exercise cells replaced by their worked solution."""
    sol = solution(name)
    for cid in cell_ids:
        nb.cells[index(nb, cid)].source = sol.cells[index(sol, cid)].source.replace(
            "### BEGIN SOLUTION", "# solved").replace("### END SOLUTION", "")
    return nb


def edit(nb, cell_id: str, old: str, new: str):
    cell = nb.cells[index(nb, cell_id)]
    assert old in cell.source, (cell_id, old)
    cell.source = cell.source.replace(old, new)
    return nb


def replace(nb, cell_id: str, source: str):
    nb.cells[index(nb, cell_id)].source = source
    return nb


def delete(nb, cell_id: str):
    del nb.cells[index(nb, cell_id)]
    return nb


def insert_after(nb, cell_id: str, source: str, new_id: str):
    cell = new_code_cell(source)
    cell["id"] = new_id
    nb.cells.insert(index(nb, cell_id) + 1, cell)
    return nb


def ran(nb):
    """Fake outputs and execution counts, as a saved, run notebook has them."""
    nb = copy.deepcopy(nb)
    for k, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = k + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="output of a learner's run\n")]
    return nb


def write(nb, path: Path) -> Path:
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return path


def class_of(folder: Path) -> dict[str, Path]:
    """One submission per case; file name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    subs = {
        # the worked solution, saved after a run: every check passes
        "alice_01_vector_add.ipynb": ran(solution("01_vector_add")),
        # a wrong answer: y + y instead of x + y; both checks use the class, so both fail
        "bob_01_vector_add.ipynb": edit(solve(lab("01_vector_add"), "01_vector_add", ADD, ADD_FAST), ADD,
                                        "ns.add(z_local, x_local, y_local, count)",
                                        "ns.add(z_local, y_local, y_local, count)"),
        # partly done (exercise 1 only); no lab in the file name: told from its cell ids
        "carol.ipynb": solve(lab("00_tour"), "00_tour", PEAK),
        # exercise 1 solved, exercise 2 not, and its failing check deleted: it is put back and fails
        "dave_01_vector_add.ipynb": delete(solve(lab("01_vector_add"), "01_vector_add", ADD),
                                           "check-vector-add-fast"),
        # a wrong peak_tflops whose check was edited to pass: the check is restored and fails
        "erin_00_tour.ipynb": replace(edit(solve(lab("00_tour"), "00_tour", PEAK, COPY), PEAK,
                                           'config.cube_macs_per_cycle["float16"] * 2',
                                           'config.cube_macs_per_cycle["float16"] * 1'),
                                      "check-peak-tflops", "pass"),
        # an endless loop in exercise 2: its cell and its check time out
        "frank_00_tour.ipynb": replace(solve(lab("00_tour"), "00_tour", PEAK), COPY,
                                       "def copy_cycles(config, nbytes):\n    while True:\n        pass\n\n\n"
                                       "print(copy_cycles(ns.a2, 8192))"),
        # the kernel process exits after exercise 1's check
        "heidi_00_tour.ipynb": insert_after(solve(lab("00_tour"), "00_tour", PEAK, COPY), "check-peak-tflops",
                                            "import os\nos._exit(1)", "crash-cell"),
        # a 100 MB print in an extra cell; everything else is solved
        "ivan_00_tour.ipynb": insert_after(solution("00_tour"), "check-peak-tflops",
                                           "print('x' * 100_000_000)", "huge-output"),
        # exercise 2's cell deleted (the missing exercise): its check cannot find copy_cycles
        "judy_00_tour.ipynb": delete(solution("00_tour"), COPY),
    }
    paths = {name: write(nb, folder / name) for name, nb in subs.items()}
    # broken JSON: a solution cut short mid-file
    text = (ROOT / "solutions" / "01_vector_add.ipynb").read_text(encoding="utf-8")
    broken = folder / "grace_01_vector_add.ipynb"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    paths[broken.name] = broken
    return paths


# --- hostile submissions: each is lab 00 solved, plus one cell that attacks the course ------------------

_FIND = ("import os, npusim\n"
         "copy = os.path.dirname(npusim.__file__)   # the package this kernel imports\n"
         "course = {course!r}                        # the course folder, had the learner guessed it\n")
TAMPER = {
    # delete the checks of labs 00-03 and a solution, in the imported copy and in the course folder
    "delete-checks": _FIND + (
        "for target in (copy + '/checks/lab00_01.py', course + '/npusim/checks/lab00_01.py',\n"
        "               course + '/solutions/01_vector_add.ipynb'):\n"
        "    try:\n        os.remove(target)\n    except OSError as e:\n        print('refused:', e)\n"),
    # plant a check module that passes lab 01 for anyone (collected after lab00_01, so its names win)
    "fake-check": _FIND + (
        "fake = ('from ._core import passed\\n'\n"
        "        'def vector_add(k):\\n    passed(\"vector_add\", \"3 hidden inputs match\")\\n'\n"
        "        'def vector_add_fast(k):\\n    passed(\"vector_add_fast\", \"fast enough\")\\n')\n"
        "for folder in (copy + '/checks', course + '/npusim/checks'):\n"
        "    try:\n        open(folder + '/lab01_zfake.py', 'w').write(fake)\n"
        "    except OSError as e:\n        print('refused:', e)\n"),
    # rewrite the grader's pytest plugin so that it logs nothing (a later run would score from nothing)
    "rewrite-plugin": _FIND + (
        "for path in (copy + '/course/grading/plugin.py', course + '/npusim/course/grading/plugin.py'):\n"
        "    try:\n        open(path, 'a').write('\\ndef pytest_runtest_makereport(item, call):\\n    pass\\n')\n"
        "    except OSError as e:\n        print('refused:', e)\n"),
}


def tamperer(kind: str, course: Path):
    """Lab 00, solved, with a cell after its first check that runs attack ``kind`` of :data:`TAMPER`."""
    return insert_after(solution("00_tour"), "check-peak-tflops", TAMPER[kind].format(course=str(course)),
                        f"attack-{kind}")


def course_copy(folder: Path) -> Path:
    """A course folder to grade (``--root``): this repository's ``npusim/`` and ``solutions/``, plus a lab
    ``98_seed`` whose one check prints the seed and strictness its kernel was given."""
    import shutil

    shutil.copytree(ROOT / "npusim", folder / "npusim", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "solutions", folder / "solutions")
    (folder / "npusim" / "checks" / "lab98_seed.py").write_text(
        "import os\n\nfrom ._core import passed\n\n\ndef seed_echo():\n"
        "    passed('seed_echo', f\"seed {os.environ.get('NPUSIM_CHECK_SEED')} \"\n"
        "                        f\"strict {os.environ.get('NPUSIM_STRICT')}\")\n", encoding="utf-8")
    imp = new_code_cell("from npusim import checks as check")
    imp["id"] = "98_see-import"
    chk = new_code_cell("check.seed_echo()", metadata={"tags": ["check"]})
    chk["id"] = "check-seed-echo"
    write(nbformat.v4.new_notebook(cells=[imp, chk]), folder / "solutions" / "98_seed.ipynb")
    return folder
