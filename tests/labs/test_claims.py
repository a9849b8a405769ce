"""Every number a lab's prose states has a source (issue: every claim a lab makes is true).

A sentence of a lab's markdown that states a number passes when each of its numbers is
- printed by the solved lab's cells (rounded as the sentence rounds it),
- a literal of the lab's own code (a size, a tile, a seed it sets),
- a fact of the package listed in ``FACTS`` (a keyword of the sentence picks the fact; ``test_fact``
  asserts the package still says so),
- cited with its source in ``docs/`` (published figures the labs compare against), or
- part of a sentence listed in ``CLAIMS``, whose test asserts what the sentence says.

The solved labs' outputs come from nbval's run of ``solutions/`` in the same pytest session (the root
``conftest.py`` keeps them and runs these tests last); run alone, this file executes the solutions itself.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from npusim import config as ns_config
from npusim.course import claims as C

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
DOCS = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
pytestmark = [pytest.mark.labs, pytest.mark.slow, pytest.mark.claims]


def _a2():
    return ns_config.get_config("a2")


# number as written, a word the sentence must contain, what the package says it is
def _check_constant(module: str, name: str, scale: float = 1.0) -> Callable[[], float]:
    def get() -> float:
        import importlib
        return getattr(importlib.import_module(f"npusim.checks.{module}"), name) * scale
    return get


FACTS: list[tuple[str, str, Callable[[], float]]] = [
    ("192", r"UB", lambda: _a2().ub_bytes / 1024),
    ("65504", r"fp16|65504", lambda: float(np.finfo(np.float16).max)),
    ("255", r"levels", lambda: float(np.iinfo(np.int8).max - np.iinfo(np.int8).min)),
    ("84", r"roofline", _check_constant("lab01_vector_add", "TARGET_ROOFLINE", 100)),
    ("65", r"Cube utilisation", _check_constant("lab03_matmul", "REUSE_TARGET", 100)),
    ("1.1", r"within .* of the fp32 run", _check_constant("lab05_loss_scaling", "TRAIN_TARGET")),
]


def _digits(n: float) -> str:
    return f"{n:g}"


# (lab, a fragment of the sentence) -> a function of what the solved lab printed, asserting what the
# sentence says
CLAIMS: dict[tuple[str, str], Callable[[str], None]] = {}


def claim(lab: str, fragment: str):
    def register(fn):
        CLAIMS[(lab, fragment)] = fn
        return fn
    return register


@claim("02_softmax", "passes that already at")
def _exp_overflows_fp16_at_11(printed: str):
    assert round(math.log(float(np.finfo(np.float16).max)), 1) == 11.1


@claim("02_softmax", "fp32 values is 400 KB")
def _row_of_100k_fp32_is_400_kb(printed: str):
    assert 100_000 * np.dtype(np.float32).itemsize / 1000 == 400


@claim("05_fp16", "rounds every result by at most")
def _fp16_unit_roundoff(printed: str):
    assert float(np.finfo(np.float16).eps) / 2 == 2.0 ** -11 and round(100 * 2.0 ** -11, 2) == 0.05


@claim("05_fp16", "so K = 32")
def _small_cnn_k(printed: str):
    assert 32 * 3 * 3 == 288


@claim("05_fp16", "K = 288: about twice")
def _fp16_accumulator_twice_the_mixed_error(printed: str):
    fp16 = float(re.search(r"fp16, fp16 acc\.\s+after 12 layers: (\S+)", printed).group(1))
    mixed = float(re.search(r"fp16, fp32 acc\.\s+after 12 layers: (\S+)", printed).group(1))
    assert 32 * 3 * 3 == 288 and 1.6 <= fp16 / mixed <= 2.5, (fp16, mixed)


@claim("05_fp16", "real layers have K = 576")
def _real_layers_k(printed: str):
    assert (64 * 9, 512 * 9) == (576, 4608)  # ResNet's 3x3 convolutions over 64 ... 512 channels
    assert round(math.sqrt(576 / 288), 1) == 1.4 and math.sqrt(4608 / 288) == 4


@claim("06_fusion", "fusion's speed-up is about")
def _epilogue_speed_up_is_1_plus_128_over_k(printed: str):
    assert round(1 + 128 / (3 * 3 * 64), 2) == 1.22 and round(1 + 128 / (3 * 3 * 128), 2) == 1.11


def _docs_cite(number: C.Number) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(number.text)}(?![\d])", DOCS) is not None


@pytest.fixture(scope="module")
def printed(request) -> dict[str, str]:
    """lab -> what its solved cells printed."""
    kept = getattr(request.config, "_npusim_solved_outputs", {})
    out = {}
    for path in SOLUTIONS:
        text = kept.get(path.stem)
        if text is None:
            from npusim.course.runner import run_notebook
            results = run_notebook(path, timeout=600, strict=True)
            failed = [r for r in results if r.status != "ok"]
            assert not failed, f"{path.name}: cell {failed[0].index} failed ({failed[0].ename}); fix that first"
            text = "\n".join(C.outputs_text(r.outputs) for r in results)
        out[path.stem] = text
    return out


def _claim_for(s: C.Sentence):
    for (lab, fragment), fn in CLAIMS.items():
        if lab == s.lab and fragment in s.text:
            return fn
    return None


def _fact_for(s: C.Sentence, n: C.Number):
    for text, word, getter in FACTS:
        if text == n.text and re.search(word, s.text):
            return getter
    return None


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_every_number_in_the_prose_has_a_source(path, printed):
    literals = C.code_literals(path)
    numbers = C.printed_numbers(printed[path.stem])
    unsourced = []
    for s in C.sentences(path):
        if _claim_for(s) is not None:
            continue
        missing = [n.text for n in s.numbers
                   if not (C.matches(n, numbers) or n.value in literals
                           or _fact_for(s, n) is not None or _docs_cite(n))]
        if missing:
            unsourced.append(f"  cell {s.cell_id}: {', '.join(missing)} in {s.text[:200]!r}")
    assert not unsourced, (f"{path.name}: numbers that no cell prints, no code sets, and no fact, source or "
                           f"claim test backs:\n" + "\n".join(unsourced))


@pytest.mark.parametrize("text,word,getter", FACTS, ids=[f"{t}-{w}" for t, w, _ in FACTS])
def test_fact(text, word, getter):
    assert _digits(getter()) == _digits(float(text.replace(",", ""))), \
        f"the labs say {text} ({word}); the package now says {getter()}"


@pytest.mark.parametrize("key", list(CLAIMS), ids=[f"{lab}:{frag[:30]}" for lab, frag in CLAIMS])
def test_claim(key, printed):
    lab, fragment = key
    path = ROOT / "solutions" / f"{lab}.ipynb"
    assert any(fragment in s.text for s in C.sentences(path)), \
        f"{lab}: no sentence says {fragment!r} any more; remove its claim test"
    CLAIMS[key](printed[lab])


def test_sentences_are_found():
    """The finder itself: digits in names and references are not claims; numbers are."""
    text = "Lab 03, exercise 2: fp16 on L0A and MTE2 of the 910B moves 1,600 GB/s, 2.5x faster (hint 3)."
    assert [n.text for n in C.numbers_in(C.claim_text(text))] == ["1,600", "2.5"]
    assert C.matches(C.numbers_in("2.5")[0], [2.54]) and not C.matches(C.numbers_in("2.5")[0], [2.44])
    assert C.matches(C.numbers_in("0.35 %")[0], C.printed_numbers("after 12 layers: 3.45e-03"))
    assert C.printed_numbers("1,048,576 elements at 1_024 B") == {1048576.0, 1024.0}


def test_an_unsourced_number_is_found(tmp_path, printed):
    """A sentence stating a number the lab never prints fails the prose test."""
    import nbformat
    nb = nbformat.read(SOLUTIONS[0], as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("Your kernel now moves 12345.6 GB/s, 3.21x faster."))
    path = tmp_path / SOLUTIONS[0].name
    nbformat.write(nb, path)
    with pytest.raises(AssertionError, match=r"12345\.6, 3\.21 in 'Your kernel"):
        test_every_number_in_the_prose_has_a_source(path, printed)
