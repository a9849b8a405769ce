"""Every exercise's hint ladder keeps the skill for the learner (issue 25 item 4): three levels (a
direction, the approach without its key step, a :class:`npusim.checks.Skeleton`); every exercise names its
key in its own markdown; and the key test of a ladder: filling the skeleton's blanks with the simplest
tokens that fit (``0``, ``1``, ``tile``, the numbers, attributes and names its code and setup already use;
one token everywhere, then a few random mixes) and running its check under ``NPUSIM_STRICT=1`` does NOT
pass. Where :data:`SOLUTION_FILLS` gives the solution's code for each blank, that fill must pass (the
skeleton is complete and runs outside the notebook: its ``cells`` of the lab's solution, then its
``setup``, then its code, then its ``call``).

Every skeleton here is code: the one exercise that is not (lab 00's hand prediction of a copy's cycles) is
part of the ``copy-cycles`` check, whose skeleton is the function the prediction is worked out with.

The ladders are collected from the lab modules (``npusim/checks/labNN*.py``), so every lab's ladders are
tested here, whoever wrote them.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import io
import pkgutil
import random
import re
import signal

import nbformat
import pytest

from npusim import checks
from npusim.checks import Skeleton
from npusim.checks._flow import BLANK

from labcorpus import harness  # noqa: E402  (tests/labs is on sys.path)

pytestmark = pytest.mark.labs

ROOT = harness.ROOT
RUN_SECONDS = 30          # a fill that makes a check run longer than this counts as not passing
MAX_UNIFORM = 60          # fills with one token everywhere, per skeleton
RANDOM_FILLS = 12         # fills with a random token per blank, per skeleton


def _ladders() -> list[tuple[str, str, tuple]]:
    """(lab notebook stem, key, ladder) of every lab module's HINTS."""
    out = []
    for info in sorted(pkgutil.iter_modules(checks.__path__), key=lambda i: i.name):
        if not info.name.startswith("lab"):
            continue
        mod = importlib.import_module(f"npusim.checks.{info.name}")
        lab = _lab_stem(info.name[3:5])
        out += [(lab, key, tuple(ladder)) for key, ladder in getattr(mod, "HINTS", {}).items()]
    return out


def _lab_stem(number: str) -> str:
    found = sorted((ROOT / "solutions").glob(f"{number}_*.ipynb"))
    assert len(found) == 1, f"lab {number}: expected one solutions/{number}_*.ipynb, found {found}"
    return found[0].stem


LADDERS = _ladders()
SKELETONS = [(lab, key, ladder[-1]) for lab, key, ladder in LADDERS if isinstance(ladder[-1], Skeleton)]


def _marks(lab: str) -> list:
    return [getattr(pytest.mark, f"lab{lab[:2]}")]


def _param(lab: str, key: str, *rest):
    return pytest.param(lab, key, *rest, id=key, marks=_marks(lab))


# --- the ladders' shape ------------------------------------------------------------------------------------

@pytest.mark.parametrize("lab, key, ladder", [_param(*x) for x in LADDERS])
def test_three_levels_the_last_a_skeleton_with_blanks(lab, key, ladder):
    assert len(ladder) == 3, f"{key}: {len(ladder)} levels, expected 3 (a direction, the approach, a skeleton)"
    assert all(isinstance(h, str) and h.strip() for h in ladder[:2]), f"{key}: levels 1 and 2 must be text"
    sk = ladder[2]
    assert isinstance(sk, Skeleton), f"{key}: level 3 must be a npusim.checks.Skeleton, got {type(sk).__name__}"
    assert BLANK in sk.code, f"{key}: the skeleton has no blank ({BLANK})"
    assert BLANK not in ladder[0] + ladder[1], f"{key}: a blank belongs in the skeleton (level 3)"
    assert sk.code not in ladder[1], f"{key}: level 2 repeats the skeleton"


def _markdown_by_check(nb) -> list[tuple[str, str]]:
    """(check cell id, the markdown since the previous check cell) of a notebook."""
    out, text = [], []
    for cell in nb.cells[1:]:   # not the title cell: each exercise names its key in its own text
        if cell.cell_type == "markdown":
            text.append(cell.source)
        elif "check" in cell.get("metadata", {}).get("tags", []):
            out.append((cell.id, "\n".join(text)))
            text = []
    return out


def _named_keys(text: str) -> set[str]:
    return set(re.findall(r"""check\.hint\(\s*["']([\w-]+)["']""", text))


@pytest.mark.parametrize("lab", [pytest.param(lab, id=lab, marks=_marks(lab))
                                 for lab in sorted({lab for lab, _, _ in LADDERS})])
def test_every_exercise_names_its_hint_key(lab):
    nb = nbformat.read(ROOT / "solutions" / f"{lab}.ipynb", as_version=4)
    keys = {key for lb, key, _ in LADDERS if lb == lab}
    named: set[str] = set()
    silent = []
    for check_cell, text in _markdown_by_check(nb):
        mine = _named_keys(text) & keys
        named |= mine
        if not mine:
            silent.append(check_cell)
    assert not silent, (f"{lab}: the markdown before {silent} names no hint key (write e.g. "
                        f"'Stuck? `check.hint(\"key\", 1)`' in the exercise's own text)")
    unknown = set().union(*(_named_keys(c.source) for c in nb.cells if c.cell_type == "markdown")) - set(checks.HINTS)
    assert not unknown, f"{lab}: the markdown names hint keys that do not exist: {sorted(unknown)}"
    assert keys <= named, f"{lab}: hint keys no exercise's text names: {sorted(keys - named)}"


# --- running a skeleton --------------------------------------------------------------------------------------

def _fill(code: str, tokens: list[str]) -> str:
    parts = code.split(BLANK)
    assert len(parts) == len(tokens) + 1
    return "".join(p + t for p, t in zip(parts, tokens)) + parts[-1]


class _TooLong(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: int):
    def stop(signum, frame):
        raise _TooLong(f"ran longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _run(lab: str, key: str, sk: Skeleton, code: str) -> tuple[bool, str]:
    """(passed, what happened) of the skeleton's ``call`` after its cells, setup and ``code``."""
    ns: dict = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):   # what the skeleton builds on must run (else nothing is tested)
        for cid, src in harness.sources(lab, list(sk.cells)):
            harness._run_cell(lab, cid, src, ns)
        harness._run_cell(lab, f"hint-{key}-setup", sk.setup, ns)
    try:
        with contextlib.redirect_stdout(out), _time_limit(RUN_SECONDS):
            harness._run_cell(lab, f"hint-{key}", code, ns)
            harness._run_cell(lab, f"hint-{key}-call", sk.call, ns)
    except SyntaxError as e:
        return False, f"SyntaxError: {e}"
    except Exception as e:  # noqa: BLE001 - any failure of a filled skeleton means: it did not pass
        return False, f"{type(e).__name__}: {str(e)[:200]}"
    printed = out.getvalue()
    return "PASSED" in printed, printed[-300:]


def _tokens(sk: Skeleton) -> list[str]:
    """The simplest tokens a learner could put in a blank: 0, 1, tile, then the numbers, the attributes
    (``self.tile``, ``g.sh``) and the names that the setup and the skeleton's code already use."""
    code = sk.code.replace(BLANK, "_blank_")
    names: dict[str, None] = {}
    attrs: dict[str, None] = {}
    numbers: dict[str, None] = {}     # the literals the code already uses (16, 32, 256, ...)
    for src in (sk.setup, code):
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Name) and node.id != "_blank_":
                names[node.id] = None
            elif isinstance(node, ast.arg):
                names[node.arg] = None
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names[node.name] = None
            elif isinstance(node, ast.alias):
                names[(node.asname or node.name).split(".")[0]] = None
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                attrs[ast.unparse(node)] = None
            elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
                numbers[repr(node.value)] = None
    plain = [n for n in names if not hasattr(builtins, n)]
    return list(dict.fromkeys(["0", "1", "tile", *numbers, *attrs, *plain]))


def _mechanical_fills(key: str, sk: Skeleton) -> list[list[str]]:
    blanks = sk.code.count(BLANK)
    tokens = _tokens(sk)
    fills = [[t] * blanks for t in tokens[:MAX_UNIFORM]]
    rng = random.Random(key)
    fills += [[rng.choice(tokens) for _ in range(blanks)] for _ in range(RANDOM_FILLS)]
    return fills


def test_skeleton_code_parses_with_its_blanks():
    for lab, key, sk in SKELETONS:
        ast.parse(sk.code.replace(BLANK, "_blank_"))   # a blank stands where an expression or statement goes
        ast.parse(sk.setup)
        ast.parse(sk.call, mode="eval")
        cells = harness.notebook(lab)
        assert all(c in cells for c in sk.cells), f"{key}: cells {sk.cells} not all in solutions/{lab}.ipynb"


@pytest.mark.slow
@pytest.mark.parametrize("lab, key, sk", [_param(*x) for x in SKELETONS])
def test_mechanical_fills_do_not_pass(lab, key, sk, monkeypatch):
    monkeypatch.setenv("NPUSIM_STRICT", "1")
    ran = 0
    for fill in _mechanical_fills(key, sk):
        passed, what = _run(lab, key, sk, _fill(sk.code, fill))
        assert not passed, (f"{key}: the skeleton filled mechanically with {fill} passes its check; a blank must "
                            f"be the skill, not a token in scope:\n{what}")
        ran += not what.startswith("SyntaxError")
    assert ran, f"{key}: no mechanical fill even compiled; the test proved nothing"


SOLUTION_FILLS = {
    # key -> the solution's code for each blank, in order (the skeleton, so filled, must pass its check)
    "peak-tflops": ["2", "config.clock_ghz * 1e9", "macs_per_cycle * flops_per_cycle * cycles_per_second / 1e12"],
    "copy-cycles": ["-(-nbytes // config.gm_burst_granule_bytes) * config.gm_burst_granule_bytes",
                    "config.gm_startup_cycles + config.gm_burst_overhead_cycles", "moved / config.gm_rate(1)"],
    "vector-add": ["buffer_num", "tile * self.dtype.itemsize", "min(self.tile, self.length - offset)",
                   "self.x[offset:]", "self.y[offset:]", "self.in_x.enque(x_local); self.in_y.enque(y_local)",
                   "self.out_z.enque(z_local); self.in_x.free_tensor(x_local); self.in_y.free_tensor(y_local)",
                   "self.z[offset:]"],
    "vector-add-fast": ["2", "3 * buffer_num * 2", "256", "256"],
    "block-range": ["512 // itemsize", "-(-total // blocks)", "-(-per // align) * align", "min(block * per, total)",
                    "min(per, total - start)"],
    "softmax": ["ns.set_flag(ns.HardEvent.V_S, 0); ns.wait_flag(ns.HardEvent.V_S, 0)", "-math.inf, 0.0",
                "max(m, self.reduce(ns.reduce_max, w, n))", "m_new == -math.inf",
                "s * math.exp(m - m_new) + self.reduce(ns.reduce_sum, w, n)", "1.0 / s if s > 0 else math.nan"],
    "softmax-tile": ["4 * itemsize + 4 + 4 / 64", "64", "min(largest, -(-cols // 16) * 16)"],
    "matmul": ["ns.get_block_idx(), tiles_m * tiles_n, ns.get_block_num()",
               "(tile // tiles_n) * t.base_m, (tile % tiles_n) * t.base_n", "i0 * k + kk", "k", "kk * n + j0", "n",
               "kk == 0", "i0 * n + j0", "n"],
    "matmul-reuse": ["ns.get_block_idx(), tiles_m, ns.get_block_num()", "i0 * k", "tm", "k",
                     "i * k1_all + kk // 16", "128", "128", "128", "2"],
    "conv-reuse": ["min(t.rows, g.ho - ho0)", "0, g.ho, t.rows", "ho0 * g.sh",
                   "(rows - 1) * g.sh + (g.kh - 1) * g.dh + 1", "count", "first + slot",
                   "r * self.g.sh + i * self.g.dh"],
    "nc1hwc0-transform": ["(b * c1 + ch // c0) * hw * c0 + ch % c0", "min(SLOTS, hw - p0)", "src + p0",
                          "dst + p0 * c0", "(c0 - 1) * isz"],
    "conv-img2col": ["top + g.in_rows(tile.rows)", "tile.l1_rows", "-(-tile.m // 16) * 16", "tile.k", "tile.m0",
                     "tile.k0", "tile.first_row - top", "bottom - (tile.first_row + tile.l1_rows)"],
    "conv-tiling": ["4", "112"],
}


@pytest.mark.slow
@pytest.mark.parametrize("lab, key, sk", [_param(*x) for x in SKELETONS if x[1] in SOLUTION_FILLS])
def test_solution_fill_passes(lab, key, sk, monkeypatch):
    monkeypatch.setenv("NPUSIM_STRICT", "1")
    passed, what = _run(lab, key, sk, _fill(sk.code, SOLUTION_FILLS[key]))
    assert passed, f"{key}: the skeleton filled with the solution's code does not pass:\n{what}"


def test_solution_fills_name_real_skeletons():
    known = {key: sk for _, key, sk in SKELETONS}
    for key, fill in SOLUTION_FILLS.items():
        assert key in known, f"SOLUTION_FILLS names {key!r}, which has no skeleton"
        assert len(fill) == known[key].code.count(BLANK), f"{key}: {len(fill)} fills for " \
                                                           f"{known[key].code.count(BLANK)} blanks"


def test_a_skeleton_prints_as_its_code():
    sk = SKELETONS[0][2] if SKELETONS else Skeleton("x = ___", "None")
    assert sk.code in str(sk)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        checks.hint(SKELETONS[0][1] if SKELETONS else next(iter(checks.HINTS)), 3)
    assert BLANK in buf.getvalue() or not SKELETONS

