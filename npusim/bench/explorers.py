"""Benchmark of every lab's explorer: ``npusim bench --only redraw_01_vector_add`` (one case per lab).

What a learner feels when moving a control: the milliseconds from a value change to the new charts and
table being in the widget (the lab's own function, its charts, PNG rendering, the table), in-process, no
browser. The cases are found from the notebooks: each ``solutions/NN_*.ipynb`` with an explorer cell is a
case ``redraw_NN_*``; its code cells up to the explorer run first (check cells skipped, see
:mod:`npusim.course.executor`), then every control steps through each of its values and back.

Figures per case: ``redraw_ms`` is the median over changes to a setting not seen before (the explorer's
cache cleared before each pass), with ``p90_ms``, ``max_ms`` and the median share of each step (``run_ms``:
the lab's function; ``charts_ms``: building the figures; ``render_ms``: PNG; ``table_ms``);
``cached_ms`` is the median over changes back to a setting seen before (served by the cache); ``errors``
counts changes the explorer showed as an error (e.g. a tile that overflows UB, on purpose in some labs).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from . import case

#: The redraw target of issue 17, in-process median.
TARGET_MS = 150
#: Cold passes stop starting once a case has spent this long (lab 08's explorer trains a model per setting).
BUDGET_S = 60.0


def notebooks() -> list[Path]:
    """Solution notebooks with an explorer, found from the current folder or from this package's."""
    from ..course.notebooks import find_root

    for start in (None, Path(__file__).resolve().parent):
        try:
            root = find_root(start)
        except FileNotFoundError:
            continue
        return [p for p in sorted((root / "solutions").glob("[0-9][0-9]_*.ipynb")) if "Explorer(" in p.read_text()]
    return []


def _ms(values: list[float]) -> float | None:
    return round(statistics.median(values) * 1e3, 1) if values else None


def _p90(values: list[float]) -> float | None:
    return round(sorted(values)[int(0.9 * (len(values) - 1))] * 1e3, 1) if values else None


def time_explorer(ex, passes: int = 1, budget_s: float = BUDGET_S, log=None) -> dict:
    """Step every control of ``ex`` through each of its values and back, ``passes`` times (cache cleared
    before each); the figures of the module docstring."""
    from ..views.controls import control_values

    cold, cached, errors, parts = [], [], [], {}
    t_start = time.perf_counter()
    done = 0
    for _ in range(passes):
        if done and time.perf_counter() - t_start > budget_s:
            break
        ex.forget()
        for name, widget in ex.controls.items():
            start = widget.value
            for value in [v for v in control_values(widget) if v != start] + [start]:
                before = ex.redraws
                t0 = time.perf_counter()
                widget.value = value  # observers run synchronously: returns after the redraw
                dt = time.perf_counter() - t0
                if ex.redraws == before:
                    errors.append(dt)
                elif ex.last_cached:
                    cached.append(dt)
                else:
                    cold.append(dt)
                    for k, v in ex.last_timing.items():
                        parts.setdefault(k, []).append(v)
            if log:
                log(f"{name}: {len(control_values(widget))} values")
        done += 1
    return {"redraw_ms": _ms(cold), "p90_ms": _p90(cold), "max_ms": round(max(cold) * 1e3, 1) if cold else None,
            **{f"{k}_ms": _ms(v) for k, v in parts.items()}, "cached_ms": _ms(cached), "changes": len(cold),
            "revisits": len(cached), "errors": len(errors), "passes": done, "controls": list(ex.controls)}


def redraw_case(path: Path, repeat: int) -> dict:
    """The figures of the explorers of one solution notebook (see the module docstring)."""
    import matplotlib

    matplotlib.use("Agg")  # the notebook's own pyplot figures go nowhere
    import matplotlib.pyplot as plt

    from ..course.executor import is_explorer_cell, run_cells

    def log(msg: str) -> None:
        print(f"  {path.stem}: {msg}", file=sys.stderr, flush=True)

    name = f"redraw_{path.stem}"
    log("running the notebook up to its explorer ...")
    t0 = time.perf_counter()
    try:
        nb = run_cells(path, until=is_explorer_cell)
    except Exception as e:  # noqa: BLE001 - reported as the case's result
        return {"kernel": name, "error": f"the notebook stopped before its explorer: {type(e).__name__}: {e}"}
    finally:
        plt.close("all")
    setup_s = round(time.perf_counter() - t0, 2)
    explorers = nb.explorers()
    if not explorers:
        return {"kernel": name, "error": "no explorer object after the explorer cell ran"}
    figures = []
    for var, ex in explorers.items():
        log(f"timing `{var}` ...")
        figures.append({"explorer": var, **time_explorer(ex, passes=max(1, repeat), log=log)})
    worst = max(figures, key=lambda f: f["redraw_ms"] or 0.0)
    return {"kernel": name, **worst, "target_ms": TARGET_MS,
            "meets_target": worst["redraw_ms"] is not None and worst["redraw_ms"] <= TARGET_MS,
            "setup_s": setup_s, "explorers": len(figures)}


def _register() -> None:
    for path in notebooks():
        def run(repeat: int, path: Path = path) -> dict:
            return redraw_case(path, repeat)

        run.__doc__ = f"redraw of the explorer of {path.parent.name}/{path.name}, ms per control change"
        case(f"redraw_{path.stem}")(run)


_register()
