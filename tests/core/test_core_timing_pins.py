"""The simulator computes the same cycles, timelines and outputs as the code the pins were written by
(``timing_pins.py``): speed work must not move a single simulated number."""

import json

import pytest

from timing_pins import CASES, PINS, compute

pytestmark = pytest.mark.core

_PINNED = json.loads(PINS.read_text())


def test_every_case_is_pinned():
    assert set(_PINNED) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_its_pins(name):
    got = compute(name)
    want = _PINNED[name]
    assert set(got) == set(want)
    for label in want:
        assert got[label] == want[label], label
