"""docs/hardware.md's "Ascend C API in npusim" table: its closing counts are its rows', and every instruction
npusim exports appears in it (so the table cannot fall behind the instruction set)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

import npusim as ns

pytestmark = pytest.mark.ascendc
DOC = Path(__file__).resolve().parents[2] / "docs" / "hardware.md"


def _rows():
    text = DOC.read_text()
    section = text[text.index("## Ascend C API in npusim"):]
    section = section[:section.index("\n## ", 5)]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return section, rows[1:]


def test_the_closing_counts_are_the_tables():
    section, rows = _rows()
    before = Counter(r[2].strip() for r in rows)
    now = Counter(r[3].strip() for r in rows)
    m = re.search(r"Counts \((\d+) rows\): before, (\d+) same, (\d+) different, (\d+) missing; now, (\d+) same, "
                  r"(\d+) different, (\d+) missing", section.replace("\n", " "))
    assert m, "the closing counts sentence is missing"
    assert [int(g) for g in m.groups()] == [len(rows), before["same"], before["different"], before["missing"],
                                            now["same"], now["different"], now["missing"]]


def test_every_exported_instruction_is_in_the_table():
    _, rows = _rows()
    names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", " ".join(r[1] for r in rows)))
    exported = [n for n in ns.instructions.__all__ if n not in ("CMPMODE", "SELMODE", "ReduceOrder")]
    missing = [n for n in exported if n not in names]
    assert not missing, f"instructions not in docs/hardware.md's API table: {missing}"
