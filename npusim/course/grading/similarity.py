"""Copying, for the instructor to look at: an exercise whose code is nearly the course's reference answer
or nearly another submission's of the same run is flagged (never failed) in the gradebook and summary.

Code is compared as its normalised syntax tree: comments, docstrings, blank lines and formatting are
gone, and every name the code binds (variables, arguments, its own functions and classes) is renamed by
order of first use, so renaming and re-commenting do not hide a copy; the attributes and library names it
uses stay. Two cells are near when :class:`difflib.SequenceMatcher` finds at least ``threshold`` of their
token streams in common. Cells left as the lab gave them, and exercises too short to tell a copy from
the one natural answer (fewer than ``min_tokens`` normalised tokens, in the reference or in the learner's
cell), are not compared; two submissions that are both nearly the reference are flagged for that alone.
"""

from __future__ import annotations

import ast
import difflib
import re
from typing import Iterable

import nbformat

from .labs import Lab
from .scoring import Grade

THRESHOLD = 0.9
MIN_TOKENS = 150                      # about five lines of code
_TOKEN = re.compile(r"\w+|[^\w\s]")


class _Rename(ast.NodeTransformer):
    """Bound names -> ``v0, v1, ...`` by first appearance; docstrings dropped."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.bound: set[str] = set()

    def _new(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, (ast.Store, ast.Del)) or node.id in self.names:
            node.id = self._new(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg, node.annotation = self._new(node.arg), None
        return node

    def _body(self, node):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    def visit_FunctionDef(self, node):
        node.name, node.returns = self._new(node.name), None
        self.generic_visit(self._body(node))
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        node.name = self._new(node.name)
        self.generic_visit(self._body(node))
        return node


def fingerprint(source: str) -> list[str]:
    """The normalised token stream of ``source`` (empty when it is not Python: magics, syntax errors)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    tree = _Rename().visit(tree)
    return _TOKEN.findall(ast.dump(tree, annotate_fields=False, include_attributes=False))


def similarity(a: list[str], b: list[str]) -> float:
    """The share of two token streams in common (0..1)."""
    if not a or not b:
        return 0.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def exercises(lab: Lab, solution: bytes) -> dict[str, tuple[str, str]]:
    """``{cell id: (learner template, reference answer)}`` of the exercise cells of ``lab`` (code cells
    whose solution has a ``### BEGIN SOLUTION`` region)."""
    sol = nbformat.reads(solution.decode("utf-8"), as_version=4)
    template = {c.get("id"): c.get("source", "") for c in lab.cells}
    return {c["id"]: (template[c["id"]], c.source) for c in sol.cells
            if c.cell_type == "code" and c.get("id") in template and "### BEGIN SOLUTION" in c.source}


def flag_similar(grades: Iterable[Grade], labs: dict[str, Lab], solutions: dict[str, bytes],
                 threshold: float = THRESHOLD, min_tokens: int = MIN_TOKENS) -> int:
    """Add a ``similar`` flag to each exercise of ``grades`` that is nearly the reference answer or nearly
    another submission's (the pair named both ways); returns the number of flags added."""
    grades = [g for g in grades if g.lab in labs and g.sources]
    added = 0
    for name in {g.lab for g in grades}:
        if f"{name}.ipynb" not in solutions:
            continue
        for cid, (template, reference) in exercises(labs[name], solutions[f"{name}.ipynb"]).items():
            ref = fingerprint(reference)
            if len(ref) < min_tokens:
                continue
            mine = [(g, fp) for g in grades
                    if g.lab == name and g.sources.get(cid, template).strip() != template.strip()
                    and len(fp := fingerprint(g.sources[cid])) >= min_tokens]
            like_ref = set()
            for g, fp in mine:
                if (share := similarity(fp, ref)) >= threshold:
                    g.flags.append(f"similar {cid}: {share:.0%} the reference answer")
                    like_ref.add(id(g))
                    added += 1
            for i, (g, fp) in enumerate(mine):
                for h, other in mine[i + 1:]:
                    if {id(g), id(h)} <= like_ref:
                        continue        # both copied the reference: that is their flag
                    if g.learner != h.learner and (share := similarity(fp, other)) >= threshold:
                        g.flags.append(f"similar {cid}: {share:.0%} {h.learner} ({h.path.name})")
                        h.flags.append(f"similar {cid}: {share:.0%} {g.learner} ({g.path.name})")
                        added += 2
    return added
