"""Shared fixtures of the whole-model tests: the labs' CNN, a batch, and its profiles before and after the
graph pass (computed once per session)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported anywhere: no GUI in tests

import pytest  # noqa: E402

from npusim import model as nm  # noqa: E402


@pytest.fixture(scope="session")
def graph():
    return nm.small_cnn()


@pytest.fixture(scope="session")
def batch():
    return nm.images(4)


@pytest.fixture(scope="session")
def before(graph, batch):
    return nm.run_model(graph, batch, label="as captured", memo=False)  # every kernel simulated: exact outputs


@pytest.fixture(scope="session")
def after(graph, batch):
    return nm.run_model(nm.optimize(graph), batch, label="after the pass", memo=False)
