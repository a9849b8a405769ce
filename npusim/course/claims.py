"""The numbers a lab's prose states, and where each one comes from.

A lab's markdown may state a number only if the simulator gives it: a sentence's numbers must each be
found in what the solved lab's cells print (rounded as the sentence rounds it), or be a literal of the
lab's own code (a size, a tile, a seed it sets), or be a documented fact of the package that a test
asserts (``tests/labs/test_claims.py``), or the sentence is a claim that a test names and asserts. This
module finds the sentences and their numbers; the test decides where each comes from.

What is not a claim: digits inside names (``fp16``, ``L0A``, ``MTE2``, ``NC1HWC0``, ``910B``), inside code
spans, in references to labs, exercises, hints, cells and steps, and list or heading numbers.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import nbformat

_CODE_SPAN = re.compile(r"```.*?```|`[^`\n]*`", re.S)
_LINK = re.compile(r"\]\([^)]*\)|https?://\S+|<img[^>]*>|!\[[^\]]*\]")
_NAME_WITH_DIGITS = re.compile(r"\b[A-Za-z_]+\d[\w-]*|\b\d+[A-Za-z_][A-Za-z_]*\d[\w]*\b|\b\d+(?:st|nd|rd|th)\b")
_REFERENCE = re.compile(r"(?i)\b(?:labs?|exercises?|levels?|hints?|sections?|steps?|parts?|cells?|goals?|"
                        r"questions?|items?|tasks?|figures?|In)\s*\[?\s*\d+(?:\s*(?:,|and|or|to|-|–)\s*\d+)*\]?")
_LIST_MARK = re.compile(r"^\s*(?:#+\s*)?\d+[.)](?:\s|$)", re.M)
_PRODUCT = re.compile(r"\b(?:Atlas\s+\d+|(?:910|310)[A-Z]*|ResNet-\d+|A[23])\b|et al\.,? \d{4}")
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(\s?%)?")
_SENTENCE = re.compile(r"(?<=[.!?:])\s+(?=[A-Z(])|\n\s*\n|\n\s*[-*]\s+|\n\s*\d+[.)]\s+|\n(?=#)")


@dataclass(frozen=True)
class Number:
    text: str      # as written, e.g. "1,600" or "2.5"
    value: float
    decimals: int  # digits after the point as written
    percent: bool = False  # written as a percentage: also matches a printed fraction (0.345 -> 34.5 %)


@dataclass(frozen=True)
class Sentence:
    lab: str       # e.g. "05_fp16"
    cell_id: str
    text: str      # the sentence as the learner reads it (code spans kept)
    numbers: tuple[Number, ...]


def numbers_in(text: str) -> list[Number]:
    """The numbers of ``text`` (``1,600`` is one thousand six hundred; ``2.54`` has two decimals)."""
    out = []
    for m in _NUMBER.finditer(text):
        whole, frac = m.group(1), m.group(2)
        value = float(whole.replace(",", "") + (f".{frac}" if frac else ""))
        out.append(Number(m.group(0).removesuffix("%").strip(), value, len(frac or ""), bool(m.group(3))))
    return out


def claim_text(sentence: str) -> str:
    """``sentence`` without what is not a claim (code spans, names with digits, references, list marks)."""
    s = _CODE_SPAN.sub(" ", sentence)
    s = _LINK.sub(" ", s)
    s = _LIST_MARK.sub(" ", s)
    s = _REFERENCE.sub(" ", s)
    s = _PRODUCT.sub(" ", s)
    s = _NAME_WITH_DIGITS.sub(" ", s)
    return s


def sentences(path) -> list[Sentence]:
    """Every sentence of a notebook's markdown that states a number."""
    nb = nbformat.read(path, as_version=4)
    lab = str(path).rsplit("/", 1)[-1].removesuffix(".ipynb")
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for raw in _SENTENCE.split(_CODE_SPAN.sub(lambda m: m.group(0).replace("\n", " "), cell.source)):
            text = " ".join(raw.split())
            nums = numbers_in(claim_text(text))
            if nums:
                found.append(Sentence(lab, cell.get("id", ""), text, tuple(nums)))
    return found


def code_literals(path) -> set[float]:
    """The numeric literals of a notebook's code cells (the sizes, tiles and seeds the lab sets)."""
    nb = nbformat.read(path, as_version=4)
    out: set[float] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        src = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                    and not isinstance(node.value, bool):
                out.add(float(node.value))
            elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Pow, ast.LShift, ast.Mult)) \
                    and isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant):
                try:  # 2 ** 20, 1 << 20, 1024 * 1024: the size a sentence states
                    out.add(float(eval(compile(ast.Expression(node), "<literal>", "eval"))))
                except (TypeError, OverflowError, ValueError):
                    pass
    return out


_PRINTED = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")


def printed_numbers(outputs_text: str) -> set[float]:
    """Every number in what a lab's cells printed (``1,048,576``, ``3.45e-03``, ``1_024``)."""
    return {float(m.group(0).replace(",", "")) for m in _PRINTED.finditer(outputs_text.replace("_", ""))}


def matches(number: Number, printed: list[float] | set[float]) -> bool:
    """Whether ``number`` is one of ``printed`` rounded as the sentence rounds it (``2.5`` matches
    ``2.54``; ``80`` matches ``79.6``; ``0.35 %`` matches ``3.45e-03``)."""
    half = 0.5 * 10.0 ** -number.decimals * (1 + 1e-9)
    for p in printed:
        if abs(p - number.value) <= half or number.percent and p < 1 and abs(100 * p - number.value) <= half:
            return True
    return False


_TAG = re.compile(r"<[^>]+>")


def outputs_text(outputs: list[dict]) -> str:
    """The text of a cell's outputs (streams, plain text, HTML tables without their tags): from
    :func:`npusim.course.runner.run_notebook` (``type``) or from nbformat / nbval (``output_type``)."""
    parts = []
    for o in outputs:
        kind = o.get("type") or o.get("output_type")
        if kind == "stream":
            parts.append(o.get("text", ""))
        elif kind in ("display_data", "execute_result"):
            data = o.get("data", {})
            parts.append(data.get("text/plain", ""))
            parts.append(_TAG.sub(" ", data.get("text/html", "")))
    return "\n".join(parts)
