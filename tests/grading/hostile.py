"""A hostile class for ``npusim grade``: a small lab ``97_trust`` (two exercises, two checks on hidden
inputs drawn from the seed) in a course copy with a ``.git``, honest submissions, a planted pair of
copies, and one submission per attack. Each attack, had it worked, would have earned marks (it solves the
exercise only when the attack succeeds), so its expected marks are 0 and the grader's row says whether it
got through."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from fabricate import ROOT, write

LAB = "97_trust"
IMPORT, DOUBLE, TRIPLE = "97_tru-import", "97_tru-double", "97_tru-triple"

CHECKS = '''"""Lab 97 (tests only): a list doubled and tripled, checked on hidden inputs."""
from ._core import CheckFailed, call_learner, case_rng, passed


def _check(name, fn, factor):
    for case in range(3):
        values = [int(v) for v in case_rng(name, case).integers(-1000, 1000, 6)]
        got = call_learner(name, fn, values, case={"n": len(values)})
        if list(got) != [factor * v for v in values]:
            raise CheckFailed(name, f"wrong on the hidden input {case}")
    passed(name, "3 hidden inputs")


def trust_double(fn):
    _check("trust_double", fn, 2)


def trust_triple(fn):
    _check("trust_triple", fn, 3)
'''

REFERENCE = {
    DOUBLE: ("def double(values):\n    \"\"\"Each value times two, as a list.\"\"\"\n    ### BEGIN SOLUTION\n"
             "    result = []\n    for value in values:\n        twice = value + value\n"
             "        if twice is None:\n            raise ValueError(value)\n        result.append(twice)\n"
             "    return result\n    ### END SOLUTION\n"),
    TRIPLE: ("def triple(values):\n    \"\"\"Each value times three, as a list.\"\"\"\n    ### BEGIN SOLUTION\n"
             "    result = []\n    for value in values:\n        thrice = value + value + value\n"
             "        if thrice is None:\n            raise ValueError(value)\n        result.append(thrice)\n"
             "    return result\n    ### END SOLUTION\n"),
}
OWN = {DOUBLE: "def double(values):\n    return [2 * v for v in values]\n",
       TRIPLE: "def triple(values):\n    return list(map(lambda v: v * 3, values))\n"}
# the planted pair: the same code, renamed and re-commented
PAIR = ("def {f}({a}):\n    # {c}\n    {acc} = {{}}\n    for {i}, {x} in enumerate({a}):\n"
        "        {acc}[{i}] = {x} * {k}\n        {acc}[{i}] = {acc}[{i}] - 0\n"
        "    keys = sorted({acc})\n    return [{acc}[key] for key in keys]\n")


def pair(cid: str, variant: int) -> str:
    f, k = ("double", 2) if cid == DOUBLE else ("triple", 3)
    names = [("values", "acc", "i", "x", "mine"), ("numbers", "table", "n", "item", "my own way")][variant]
    return PAIR.format(f=f, k=k, a=names[0], acc=names[1], i=names[2], x=names[3], c=names[4])


def course(folder: Path) -> Path:
    """A course to grade: this repository's ``npusim/`` and lab ``97_trust`` in ``solutions/``, committed
    to a git repository (so that ``.git`` holds the solution too)."""
    shutil.copytree(ROOT / "npusim", folder / "npusim", ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "npusim" / "checks" / "lab97_trust.py").write_text(CHECKS, encoding="utf-8")
    cells = [new_code_cell("from npusim import checks as check"),
             new_code_cell(REFERENCE[DOUBLE]), new_code_cell("check.trust_double(double)", metadata={"tags": ["check"]}),
             new_code_cell(REFERENCE[TRIPLE]), new_code_cell("check.trust_triple(triple)", metadata={"tags": ["check"]})]
    for cell, cid in zip(cells, [IMPORT, DOUBLE, "check-double", TRIPLE, "check-triple"]):
        cell["id"] = cid
    (folder / "solutions").mkdir()
    write(new_notebook(cells=cells), folder / "solutions" / f"{LAB}.ipynb")
    git = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "course"], check=True)
    return folder


def _lab(course_root: Path, solved: dict[str, str] | None = None):
    from npusim.course.notebooks import make_lab

    sol = nbformat.read(course_root / "solutions" / f"{LAB}.ipynb", as_version=4)
    nb = make_lab(sol, LAB)
    for cell in nb.cells:
        if cell.get("id") in (solved or {}):
            cell.source = solved[cell["id"]]
    return nb


def _after(nb, cell_id: str, source: str, new_id: str):
    cell = new_code_cell(source)
    cell["id"] = new_id
    nb.cells.insert(next(i for i, c in enumerate(nb.cells) if c.get("id") == cell_id) + 1, cell)
    return nb


SOLVED = {cid: src.replace("    ### BEGIN SOLUTION\n", "").replace("    ### END SOLUTION\n", "")
          for cid, src in REFERENCE.items()}
# what an attack defines when it gets through: the right answer to exercise 1
WIN = "\n    def double(values):\n        return [2 * v for v in values]\n    globals()['double'] = double\n"


def attacks(ctx: dict) -> dict[str, str]:
    """One cell per attack (inserted after exercise 1, before its check), each defining the answer to
    exercise 1 only if it gets through; ``ctx``: the paths and ports the attacks aim at (course,
    submissions, canaries, the installed checkout, a port on the grader's loopback, the scheduler's)."""
    c = {k: repr(str(v)) for k, v in ctx.items()}
    return {
        # the network: a listener on the grader's loopback, the Dask scheduler, the outside; and a daemon
        "net": (f"import socket, subprocess\n"
                 f"subprocess.Popen(['sh', '-c', 'sleep 600 & sleep 600'], start_new_session=True)\n"
                 f"got = []\n"
                 f"for host, port in (('127.0.0.1', int({c['port']})), ('127.0.0.1', int({c['scheduler']})),\n"
                 f"                   ('1.1.1.1', 80)):\n"
                 f"    try:\n        socket.create_connection((host, port), timeout=2).close()\n"
                 f"        got.append(port)\n    except OSError as e:\n        print('refused:', e)\n"
                 f"if got:{WIN}"),
        # the grader's result files: next to the home, or named on some process's command line
        "results": ("import os, glob\nhome = os.environ['HOME']\nwritten = []\n"
                 "names = glob.glob('/proc/*/cmdline')\n"
                 "paths = [os.path.join(os.path.dirname(home), 'grader', n) for n in ('junit.xml', 'cells.jsonl')]\n"
                 "for n in names:\n    try:\n        argv = open(n, 'rb').read().split(b'\\0')\n"
                 "    except OSError:\n        continue\n"
                 "    paths += [a.decode().split('=', 1)[-1] for a in argv if b'junitxml' in a or b'grade-log' in a]\n"
                 "for p in paths:\n    try:\n"
                 "        open(p, 'w').write('<testsuite><testcase name=\"Cell 2\"/></testsuite>')\n"
                 "        written.append(p)\n    except OSError as e:\n        print('refused:', e)\n"
                 f"if written:{WIN}"),
        # links to root-owned canary folders, where the grader's clean-up (or --keep) would follow them
        "links": ("import os\nhome = os.environ['HOME']\n"
                f"for i, target in enumerate(({c['canary']}, {c['canary2']})):\n"
                "    for folder in (home, home + '/tmp', home + '/work', '/tmp'):\n"
                "        try:\n            os.symlink(target, f'{folder}/trap{i}')\n"
                "        except OSError as e:\n            print('refused:', e)\n"
                "os.symlink('/', home + '/root-link')\n"),
        # the course's .git, the course itself, the checkout the package was installed from
        "checkouts": ("import json, os, subprocess, importlib.metadata as md\nfound = []\n"
                f"r = subprocess.run(['git', '-C', {c['course']}, 'show', 'HEAD:solutions/97_trust.ipynb'],\n"
                "                   capture_output=True, text=True)\nfound += [r.stdout] if r.returncode == 0 else []\n"
                "try:\n    url = json.loads(md.distribution('npusim').read_text('direct_url.json'))['url']\n"
                "except Exception as e:\n    url = ''\n    print('no direct_url:', e)\n"
                f"for folder in ({c['course']}, url.replace('file://', ''), {c['checkout']}):\n"
                "    for name in ('solutions/97_trust.ipynb', 'solutions/00_tour.ipynb', '.git/HEAD'):\n"
                "        try:\n            found.append(open(os.path.join(folder, name)).read())\n"
                "        except OSError as e:\n            print('refused:', e)\n"
                f"if found:{WIN}"),
        # a classmate's notebook: read it and run her exercise
        "classmates": ("import json\n"
                 f"try:\n    nb = json.load(open({c['subs']} + '/alice_97_trust.ipynb'))\n"
                 "    exec(''.join(next(c['source'] for c in nb['cells'] if c.get('id') == '97_tru-double')))\n"
                 "except OSError as e:\n    print('refused:', e)\n"),
        # an attempt on the course (audited), then on the audit record itself
        "audit": ("import os, sys\n"
                f"for path in ({c['course']} + '/npusim/checks/lab97_trust.py',\n"
                "             os.path.dirname(sys.modules['npusim'].__file__) + '/checks/lab97_trust.py'):\n"
                "    try:\n        open(path, 'a').write('\\n')\n    except OSError as e:\n        print('refused:', e)\n"
                "spec = json = __import__('json')\n"
                "sock = json.loads(os.environ['NPUSIM_GRADE_AUDIT'])['socket']\n"
                "for act in (lambda: os.unlink(sock), lambda: open(sock, 'w'), lambda: os.environ.pop('NPUSIM_GRADE_AUDIT')):\n"
                "    try:\n        act()\n    except OSError as e:\n        print('refused:', e)\n"),
        # in-process forging: a replaced check, a patched module with a split PASSED, the public seed
        "replace-check": "check.trust_double = lambda fn: print('PASSED trust_double: 3 hidden inputs')\n",
        "patch-module": ("import npusim.checks as c\n"
                 "setattr(c, 'trust_' + 'double', lambda fn: print('PASS' + 'ED trust_double: 3 hidden inputs'))\n"),
    }


def corpus(course_root: Path, folder: Path, ctx: dict) -> dict[str, Path]:
    """Every submission of the class, written to ``folder``: learner -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    nbs = {"alice": _lab(course_root, SOLVED), "bob": _lab(course_root, OWN),
           "pat": _lab(course_root, {DOUBLE: pair(DOUBLE, 0), TRIPLE: pair(TRIPLE, 0)}),
           "quinn": _lab(course_root, {DOUBLE: pair(DOUBLE, 1), TRIPLE: pair(TRIPLE, 1)})}
    cells = attacks(ctx)
    # several attacks in one notebook where each alone would score (fewer kernels to start)
    for learner, kinds in {"nina": ["net", "results"], "sid": ["links", "checkouts", "classmates"],
                           "abe": ["audit"], "fiona": ["replace-check"], "gina": ["patch-module"]}.items():
        nb = _lab(course_root)
        for kind in reversed(kinds):
            nb = _after(nb, DOUBLE, cells[kind], f"attack-{kind}")
        nbs[learner] = nb
    # deletes its own home after passing both checks... after the first one: marks follow the work
    nbs["dora"] = _after(_lab(course_root, SOLVED), "check-double",
                         "import os, shutil\nfor name in os.listdir(os.environ['HOME']):\n"
                         "    p = os.path.join(os.environ['HOME'], name)\n"
                         "    shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)\n",
                         "delete-home")
    # passes the first check, then sets the public seed: the second check's pass is withheld
    nbs["hank"] = _after(_lab(course_root, SOLVED), "check-double",
                         "import os\nos.environ['NPUSIM_CHECK_SEED'] = '0'\n", "public-seed")
    # exercise 1 raises inside: the feedback names the real cell (In [2]); exercise 2 solved
    nbs["ivy"] = _lab(course_root, {DOUBLE: "def double(values):\n    return [v / 0 for v in values]\n",
                                    TRIPLE: SOLVED[TRIPLE]})
    return {name: write(nb, folder / f"{name}_{LAB}.ipynb") for name, nb in nbs.items()}


# learner -> (check-double, check-triple, status, flags that must appear)
EXPECTED = {
    "alice": (1, 1, "ok", ["similar 97_tru-double: 100% the reference answer"]),
    "bob": (1, 1, "ok", []),
    "pat": (1, 1, "ok", ["similar 97_tru-double: 100% quinn (quinn_97_trust.ipynb)"]),
    "quinn": (1, 1, "ok", ["similar 97_tru-triple: 100% pat (pat_97_trust.ipynb)"]),
    "nina": (0, 0, "ok", []),
    "sid": (0, 0, "ok", []),
    "abe": (0, 0, "tampered", ["tamper attempt"]),
    "fiona": (0, 0, "forged", ["forged In [3] (cell attack-replace-check): npusim.checks.trust_double was replaced"]),
    "gina": (0, 0, "forged", ["forged In [3] (cell attack-patch-module): npusim.checks.trust_double was replaced"]),
    "dora": (1, 1, "ok", []),
    "hank": (1, 0, "forged", ["forged In [4] (cell public-seed): NPUSIM_CHECK_SEED was changed"]),
    "ivy": (0, 1, "ok", []),
}


def canary(folder: Path) -> Path:
    """A root-owned folder (mode 755) with a file in it: it must be exactly so after grading."""
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text("canary\n", encoding="utf-8")
    folder.chmod(0o755)
    return folder


def state(folder: Path) -> tuple:
    st = os.lstat(folder)
    return (st.st_mode, st.st_uid, sorted(os.listdir(folder)), (folder / "keep.txt").read_text(encoding="utf-8"))
