"""An explorer for whole-model runs: controls bound to ``fn(**params) -> ModelProfile``, redrawing at most two
model charts and a metrics table.

It mirrors :class:`npusim.views.Explorer` (same controls: ``views.toggle``, ``views.int_choice``,
``views.choice``) for functions that return a :class:`~npusim.model.metrics.ModelProfile`. The first
successful run is the **baseline**: the ``"breakdown"`` chart draws it beside the current setting and the
table gives the speed-up. ``pin()`` makes the current run the baseline. A function that raises shows the
error's message and keeps the previous charts.
"""

from __future__ import annotations

import base64
import html
import io
import time
from typing import Any, Callable, Mapping, Sequence

import ipywidgets as w
from matplotlib.figure import Figure

from ..errors import NpuSimError, UsageError
from ..views.explorer import Control
from .charts import CHARTS, breakdown
from .metrics import CATEGORIES, LABELS, ModelProfile
from ..tables import html_table

MAX_CHARTS = 2


def _png(fig: Figure, dpi: float | None) -> dict:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": 1})
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"), "text/plain": repr(fig)}}


def metrics_rows(profile: ModelProfile, baseline: ModelProfile | None = None) -> list[tuple[str, str, str]]:
    """(metric, value, baseline) rows of the explorer's table."""
    def cells(p: ModelProfile | None) -> list[str]:
        if p is None:
            return [""] * (5 + len(CATEGORIES))
        t = p.model_time_us or 1.0
        return ([f"{p.model_time_us:,.1f} us", f"{p.mac_utilization:.3%}", f"{p.device_busy_ratio:.1%}",
                 str(p.launches), f"{p.uploads} up / {p.downloads} down"]
                + [f"{p.breakdown_us[c]:,.1f} us ({p.breakdown_us[c] / t:.0%})" for c in CATEGORIES])
    names = ["model time", "Cube utilisation", "device busy", "launches", "copies"] + [LABELS[c] for c in CATEGORIES]
    now, base = cells(profile), cells(baseline)
    rows = list(zip(names, now, base))
    if baseline is not None and profile.model_time_us:
        rows.insert(1, ("speed-up vs baseline", f"{baseline.model_time_us / profile.model_time_us:.2f}x", "1.00x"))
    return rows


class ModelExplorer:
    """Controls bound to ``fn(**params) -> ModelProfile`` (see the module docstring).

    ``charts``: up to two of ``"timeline"``, ``"breakdown"``, ``"op_utilization"`` or callables
    ``ModelProfile -> Figure``. For tests: ``controls`` (name -> widget), ``redraws``, ``last_profile``,
    ``last_error``, ``last_figures``, ``baseline``, ``last_seconds``.
    """

    def __init__(self, fn: Callable[..., ModelProfile], controls: Sequence[Control] | Mapping[str, w.ValueWidget],
                 charts: Sequence[Any] = ("timeline", "breakdown"), title: str | None = None,
                 dpi: float | None = None) -> None:
        if len(charts) > MAX_CHARTS:
            raise UsageError(f"a model explorer shows at most {MAX_CHARTS} charts, got {len(charts)}")
        self.fn = fn
        items = controls.items() if isinstance(controls, Mapping) else [(c.name, c.widget) for c in controls]
        self.controls: dict[str, w.ValueWidget] = dict(items)
        self.charts = [self._chart(c) for c in charts]
        self.dpi = dpi
        self.redraws = 0
        self.last_profile: ModelProfile | None = None
        self.last_error: BaseException | None = None
        self.last_figures: dict[str, Figure] = {}
        self.baseline: ModelProfile | None = None
        self.last_seconds = 0.0
        self.status = w.HTML()
        self.output = w.Output(layout={"min_height": "200px"})
        self.table = w.HTML()
        self.pin_button = w.Button(description="pin as baseline", icon="thumb-tack")
        self.pin_button.on_click(lambda _: self.pin())
        head = [w.HTML(f"<b>{html.escape(title)}</b>")] if title else []
        self.widget = w.VBox(head + [w.HBox(list(self.controls.values()), layout={"flex_flow": "row wrap"}),
                                     self.pin_button, self.status,
                                     w.HBox([self.output, self.table], layout={"align_items": "flex-start"})])
        for widget in self.controls.values():
            widget.observe(lambda _: self.update(), names="value")
        self.update()

    @staticmethod
    def _chart(spec: Any) -> tuple[str, Callable]:
        if callable(spec):
            return getattr(spec, "__name__", "chart"), spec
        if spec not in CHARTS:
            raise UsageError(f"unknown chart {spec!r}; choose from {sorted(CHARTS)} or pass a function")
        return spec, CHARTS[spec]

    @property
    def params(self) -> dict[str, Any]:
        return {name: widget.value for name, widget in self.controls.items()}

    def _draw(self, name: str, chart: Callable, prof: ModelProfile) -> Figure:
        if chart is breakdown:
            base = self.baseline if self.baseline is not None else prof
            return breakdown([base, prof], ["baseline", "current"])
        return chart(prof)

    def update(self) -> bool:
        """Run ``fn(**params)`` and redraw; on an error show it and keep the previous charts."""
        params = self.params
        t0 = time.perf_counter()
        try:
            prof = self.fn(**params)
            if not isinstance(prof, ModelProfile):
                raise UsageError(f"the explored function returned {type(prof).__name__}, not a ModelProfile")
            if self.baseline is None:
                self.baseline = prof
            figs = {name: self._draw(name, chart, prof) for name, chart in self.charts}
            outputs = tuple(_png(f, self.dpi) for f in figs.values())
            table = html_table(metrics_rows(prof, self.baseline), ("metric", "current", "baseline"))
        except Exception as e:  # noqa: BLE001 - shown in the widget; the kernel must not die
            self.last_error = e
            text = str(e) if isinstance(e, NpuSimError) else f"{type(e).__name__}: {e}"
            shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
            self.status.value = (f"<div style='border-left:4px solid #cf222e;padding:4px 8px;background:#fff5f5'>"
                                 f"<b>{html.escape(type(e).__name__)}</b> with {html.escape(shown)} (charts below "
                                 f"are from the last valid setting)<pre style='white-space:pre-wrap'>"
                                 f"{html.escape(text)}</pre></div>")
            return False
        self.output.outputs = outputs
        self.table.value = table
        self.status.value = ""
        self.last_profile, self.last_figures, self.last_error = prof, figs, None
        self.last_seconds = time.perf_counter() - t0
        self.redraws += 1
        return True

    def pin(self) -> None:
        """Make the current run the baseline."""
        if self.last_profile is not None:
            self.baseline = self.last_profile
            self.update()

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
