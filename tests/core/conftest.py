"""Fixtures of the npusim core tests; plain helpers live in core_helpers.py."""

import pytest


@pytest.fixture
def capture():
    """A dict kernels write debug copies into (``LocalTensor.to_numpy()`` is free and untimed)."""
    return {}
