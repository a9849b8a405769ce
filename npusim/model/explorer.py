"""An explorer for whole-model runs: controls bound to ``fn(**params) -> ModelProfile``, redrawing at most two
model charts and a metrics table.

It mirrors :class:`npusim.views.Explorer` (same controls: ``views.toggle``, ``views.int_choice``,
``views.choice``) for functions that return a :class:`~npusim.model.metrics.ModelProfile`. The first
successful run is the **baseline**: the ``"breakdown"`` chart draws it beside the current setting and the
table gives the speed-up. ``pin()`` makes the current run the baseline. As there, it says "computing ..."
while it works, keeps the previous charts until the new ones are ready (or when the function raises, showing
its message) and caches the redraws of settings seen before.
"""

from __future__ import annotations

import html
import time
from typing import Any, Callable, Mapping, Sequence

import ipywidgets as w
from matplotlib.figure import Figure

from ..errors import UsageError
from ..views.explorer import CACHE_SIZE, BaseExplorer, Control, Redraw, png_output
from .charts import CHARTS, breakdown, timeline
from .metrics import CATEGORIES, LABELS, ModelProfile
from ..tables import html_table

MAX_CHARTS = 2


def metrics_rows(profile: ModelProfile, baseline: ModelProfile | None = None) -> list[tuple[str, str, str]]:
    """(metric, value, baseline) rows of the explorer's table."""
    def cells(p: ModelProfile | None) -> list[str]:
        if p is None:
            return [""] * (5 + len(CATEGORIES))
        t = p.model_time_us or 1.0
        return ([f"{p.model_time_us:,.1f} us", f"{p.mac_utilization:.2%}", f"{p.device_busy_ratio:.1%}",
                 str(p.launches), f"{p.uploads} up / {p.downloads} down"]
                + [f"{p.breakdown_us[c]:,.1f} us ({p.breakdown_us[c] / t:.0%})" for c in CATEGORIES])
    names = ["model time", "Cube utilisation (chip)", "device busy", "launches", "copies"] + [LABELS[c] for c in CATEGORIES]
    now, base = cells(profile), cells(baseline)
    rows = list(zip(names, now, base))
    if baseline is not None and profile.model_time_us:
        rows.insert(1, ("speed-up vs baseline", f"{baseline.model_time_us / profile.model_time_us:.2f}x", "1.00x"))
    return rows


class ModelExplorer(BaseExplorer):
    """Controls bound to ``fn(**params) -> ModelProfile`` (see the module docstring).

    ``charts``: up to two of ``"timeline"``, ``"breakdown"``, ``"op_utilization"`` or callables
    ``ModelProfile -> Figure``. For tests: ``controls`` (name -> widget), ``redraws``, ``last_profile``,
    ``last_error``, ``last_figures``, ``baseline``, ``last_seconds``, ``last_timing``.
    """

    def __init__(self, fn: Callable[..., ModelProfile], controls: Sequence[Control] | Mapping[str, w.ValueWidget],
                 charts: Sequence[Any] = ("timeline", "breakdown"), title: str | None = None,
                 dpi: float | None = None, cache: int = CACHE_SIZE) -> None:
        if len(charts) > MAX_CHARTS:
            raise UsageError(f"a model explorer shows at most {MAX_CHARTS} charts, got {len(charts)}")
        self.charts = [self._chart(c) for c in charts]
        super().__init__(fn, controls, title=title, dpi=dpi, cache=cache, unpin=False)
        self.update()

    @staticmethod
    def _chart(spec: Any) -> tuple[str, Callable]:
        if callable(spec):
            return getattr(spec, "__name__", "chart"), spec
        if spec not in CHARTS:
            raise UsageError(f"unknown chart {spec!r}; choose from {sorted(CHARTS)} or pass a function")
        return spec, CHARTS[spec]

    @property
    def last_seconds(self) -> float:
        """Seconds of the last redraw."""
        return sum(self.last_timing.values())

    def _draw(self, chart: Callable, prof: ModelProfile) -> Figure:
        if chart is breakdown:
            base = self.baseline if self.baseline is not None else prof
            return breakdown([base, prof], ["baseline", "current"])
        if chart is timeline and self.baseline is not None and self.baseline is not prof:
            return timeline(prof, baseline=self.baseline)
        return chart(prof)

    def _compute(self, params: dict[str, Any], result: Any = None) -> Redraw:
        t0 = time.perf_counter()
        prof = self.fn(**params) if result is None else result
        if not isinstance(prof, ModelProfile):
            raise UsageError(f"the explored function returned {type(prof).__name__}, not a ModelProfile")
        if self.baseline is None:
            self.baseline = prof  # the first setting is the baseline
        t1 = time.perf_counter()
        figs = {name: self._draw(chart, prof) for name, chart in self.charts}
        t2 = time.perf_counter()
        outputs = tuple(png_output(f, self.dpi) for f in figs.values())
        t3 = time.perf_counter()
        table = html_table(metrics_rows(prof, self.baseline), ("metric", "current", "baseline"))
        return Redraw(prof, prof, figs, outputs, table,
                      {"run": t1 - t0, "charts": t2 - t1, "render": t3 - t2, "table": time.perf_counter() - t3})

    def _done_note(self, params: dict[str, Any], timing: dict, cached: bool) -> str:
        # a whole model takes seconds: say how long this one took
        shown = html.escape(", ".join(f"{k}={v!r}" for k, v in params.items()))
        return f"<small>{shown}: {'from the cache' if cached else f'{sum(timing.values()):.1f} s'}</small>"
