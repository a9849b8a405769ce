"""Every chart of every lab's explorer, on the settings the lab offers, is readable as the explorer shows it
(uncropped): :func:`npusim.views.layout.layout_problems` finds nothing. Each control steps through each of
its values from the lab's setting, first with no baseline, then with the lab's setting pinned (the
baseline's ticks, the compare chart). The notebook runs up to its explorer as ``npusim bench``'s redraw
cases do. Labs 08 and 09 (a model trained or run per setting) are checked at the lab's own setting,
pinned and not."""

from __future__ import annotations

import pytest

from npusim.bench.explorers import notebooks

pytestmark = [pytest.mark.views, pytest.mark.slow]

#: Labs whose every setting costs seconds to minutes: their explorer is checked at its opening setting only.
OPENING_ONLY = ("08_", "09_")


def _problems(ex, where: str) -> list[str]:
    from npusim.views.layout import layout_problems

    return [f"{where}, chart {name}: {p}" for name, fig in ex.last_figures.items() for p in layout_problems(fig)]


def _cases():
    return notebooks()


@pytest.mark.parametrize("path", _cases(), ids=lambda p: p.stem)
def test_every_chart_of_the_labs_explorer_is_readable(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from npusim.course.executor import is_explorer_cell, run_cells
    from npusim.views.controls import control_values

    try:
        nb = run_cells(path, until=is_explorer_cell)
    finally:
        plt.close("all")
    found = []
    for var, ex in nb.explorers().items():
        start = dict(ex.params)
        found += _problems(ex, f"{var} at {start}")
        sweep = not path.name.startswith(OPENING_ONLY)
        for pinned in (False, True):
            if pinned:
                ex.pin()
                found += _problems(ex, f"{var} pinned at {start}")
            if not sweep:
                continue
            for name, widget in list(ex.controls.items())[: 1 if pinned else None]:
                for value in control_values(widget):
                    if value == start[name]:
                        continue
                    before = ex.redraws
                    widget.value = value
                    if ex.redraws > before:   # an error (e.g. a tile over UB on purpose) keeps the old charts
                        found += _problems(ex, f"{var} {name}={value!r}{' pinned' if pinned else ''}")
                widget.value = start[name]
        assert ex.redraws > 0
    assert not found, "\n".join(found[:30])
