"""A small ipywidgets toolkit: controls bound to a pure ``params -> Profile`` function, redrawing charts.

::

    from npusim.views import Explorer, int_choice, choice
    from npusim.kernels.vector_add import run_vector_add

    ex = Explorer(lambda tile, buffer_num: run_vector_add(x, y, tile=tile, buffer_num=buffer_num),
                  [int_choice("tile", [256, 512, 1024, 2048, 4096]), choice("buffer_num", [1, 2])],
                  charts=("timeline", "utilization"))
    ex  # shows the controls, the charts and a metrics table

The explorer only calls ``fn(**params)``, the chart functions and :func:`~npusim.views.html.metrics_table`:
everything it shows can be had without widgets. A function that raises (e.g. a tile that overflows UB)
shows the error's message and keeps the previous charts. Charts are inline PNGs (no ipympl).
"""

from __future__ import annotations

import base64
import html
import io
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import ipywidgets as w
from IPython.display import Image
from matplotlib.figure import Figure

from ..errors import NpuSimError, UsageError
from ..profile import Profile
from .charts import CHARTS, compare
from .html import metrics_table


# --- controls ------------------------------------------------------------------------------------

@dataclass
class Control:
    """A widget bound to the keyword argument ``name`` of the explored function."""

    name: str
    widget: w.ValueWidget


def _desc(name: str, description: str | None) -> str:
    return description if description is not None else name


def int_choice(name: str, values: Sequence[int], value: int | None = None, description: str | None = None) -> Control:
    """A slider over the valid integers only (e.g. tiles ``[256, 512, 1024]``): a SelectionSlider."""
    vals = [int(v) for v in values]
    if not vals:
        raise UsageError(f"int_choice({name!r}) needs at least one value")
    value = vals[0] if value is None else int(value)
    if value not in vals:
        raise UsageError(f"int_choice({name!r}): value {value} is not one of {vals}")
    return Control(name, w.SelectionSlider(options=vals, value=value, description=_desc(name, description),
                                           continuous_update=False, style={"description_width": "initial"}))


def int_range(name: str, min: int, max: int, step: int = 1, value: int | None = None,
              description: str | None = None) -> Control:  # noqa: A002 (ipywidgets' own names)
    """An IntSlider from ``min`` to ``max`` in steps of ``step`` (only ``min + k*step`` can be chosen)."""
    if step <= 0 or (max - min) % step:
        raise UsageError(f"int_range({name!r}): max - min must be a positive multiple of step")
    return Control(name, w.IntSlider(min=min, max=max, step=step, value=min if value is None else value,
                                     description=_desc(name, description), continuous_update=False,
                                     style={"description_width": "initial"}))


def choice(name: str, options: Sequence[Any] | Mapping[str, Any], value: Any = None,
           description: str | None = None) -> Control:
    """A dropdown (dtype, preset, buffer count...). ``options`` may map labels to values."""
    opts = list(options.items()) if isinstance(options, Mapping) else list(options)
    kw = {} if value is None else {"value": value}
    return Control(name, w.Dropdown(options=opts, description=_desc(name, description), **kw))


def toggle(name: str, value: bool = False, description: str | None = None) -> Control:
    """An on/off switch (e.g. fusion)."""
    return Control(name, w.ToggleButton(value=value, description=_desc(name, description)))


def result_chart(fn: Callable[[Any], Figure]) -> Callable[[Any], Figure]:
    """Mark a chart function that draws the explored function's whole result (not only its profile)."""
    fn.takes_result = True
    return fn


# --- the explorer --------------------------------------------------------------------------------

def _png_output(fig: Figure, dpi: float | None) -> dict:
    """An Output-widget display item holding the figure as PNG, as ``display(Image(png))`` would make."""
    buf = io.BytesIO()
    # low zlib effort: encoding is a sizeable share of a redraw and the PNG stays small anyway
    fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": 1})
    img = Image(data=buf.getvalue(), format="png")
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(img.data).decode("ascii"), "text/plain": repr(fig)}}


class Explorer:
    """Controls bound to ``fn(**params) -> Profile`` (or a result with ``.profile``), redrawing ``charts``
    and a metrics table whenever a control changes.

    ``charts``: names from :data:`npusim.views.charts.CHARTS` (``"timeline"``, ``"utilization"``,
    ``"bandwidth"``, ``"roofline"``, ``"occupancy"``), ``"compare"`` (the pinned baseline vs the current
    profile; skipped until a baseline is pinned), callables ``Profile -> Figure``, or callables marked with
    :func:`result_chart`, which get ``fn``'s whole result. ``metrics``: keys of
    ``Profile.metrics()`` to tabulate (None: all).

    For tests and tools: ``controls`` (name -> widget; set ``.value`` to drive it), ``redraws`` (count of
    successful redraws), ``last_profile``, ``last_result``, ``last_error`` (the exception of the last
    failed call, None after a success), ``last_figures`` (name -> Figure of the last redraw),
    ``last_timing`` (seconds of the last redraw: ``run``, ``charts``, ``render``), ``baseline``.

    ``busy``: a message shown while ``fn`` runs (e.g. "training 4 steps on the simulator..."), for
    functions that take seconds; None shows nothing.
    """

    def __init__(self, fn: Callable[..., Any], controls: Sequence[Control] | Mapping[str, w.ValueWidget],
                 charts: Sequence[Any] = ("timeline", "utilization"), metrics: Sequence[str] | None = None,
                 dpi: float | None = None, title: str | None = None, busy: str | None = None) -> None:
        self.fn = fn
        self.busy = busy
        items = controls.items() if isinstance(controls, Mapping) else [(c.name, c.widget) for c in controls]
        self.controls: dict[str, w.ValueWidget] = dict(items)
        self.charts: list[tuple[str, Callable]] = [self._chart(c) for c in charts]
        self.metrics = list(metrics) if metrics is not None else None
        self.dpi = dpi
        self.redraws = 0
        self.last_profile: Profile | None = None
        self.last_result: Any = None
        self.last_error: BaseException | None = None
        self.last_figures: dict[str, Figure] = {}
        self.last_timing: dict[str, float] = {}
        self.baseline: Profile | None = None
        self.baseline_params: dict[str, Any] | None = None

        self.status = w.HTML()
        self.output = w.Output(layout={"min_height": "200px"})
        self.table = w.HTML()
        self.pin_button = w.Button(description="pin as baseline", icon="thumb-tack",
                                   tooltip="compare later changes against the current result")
        self.unpin_button = w.Button(description="clear baseline", disabled=True)
        self.pin_button.on_click(lambda _: self.pin())
        self.unpin_button.on_click(lambda _: self.unpin())
        head = [w.HTML(f"<b>{html.escape(title)}</b>")] if title else []
        self.widget = w.VBox(head + [
            w.HBox([*self.controls.values()], layout={"flex_flow": "row wrap"}),
            w.HBox([self.pin_button, self.unpin_button]),
            self.status,
            w.HBox([self.output, self.table], layout={"align_items": "flex-start"}),
        ])
        for widget in self.controls.values():
            widget.observe(self._on_change, names="value")
        self.update()

    @staticmethod
    def _chart(spec: Any) -> tuple[str, Callable]:
        if callable(spec):
            return getattr(spec, "__name__", "chart"), spec
        if spec == "compare":
            return "compare", spec
        try:
            return spec, CHARTS[spec]
        except KeyError:
            raise UsageError(f"unknown chart {spec!r}; choose from {sorted(CHARTS) + ['compare']} "
                             "or pass a function Profile -> Figure") from None

    # --- state -------------------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        """Current control values, the keyword arguments of ``fn``."""
        return {name: widget.value for name, widget in self.controls.items()}

    def _on_change(self, change: dict) -> None:
        self.update()

    def update(self) -> bool:
        """Call ``fn(**params)`` and redraw; on an error show its message and keep the previous charts.
        Returns True when the charts were redrawn."""
        params = self.params
        if self.busy:  # the front end shows it at once: widget state goes out before fn returns
            self.status.value = f"<i style='color:#57606a'>{html.escape(self.busy)}</i>"
        t0 = time.perf_counter()
        try:
            result = self.fn(**params)
            profile = result.profile if hasattr(result, "profile") else result
            if not isinstance(profile, Profile):
                raise UsageError(f"the explored function returned {type(result).__name__}, not a Profile "
                                 "or a result with .profile")
            t1 = time.perf_counter()
            figures = {name: self._draw(name, chart, profile, result) for name, chart in self.charts}
            figures = {k: f for k, f in figures.items() if f is not None}
            t2 = time.perf_counter()
            outputs = tuple(_png_output(f, self.dpi) for f in figures.values())
            table = metrics_table(profile, self.baseline, self.metrics)
        except Exception as e:  # noqa: BLE001 - any failure is shown in the widget; the kernel must not die
            self._fail(e, params)
            return False
        t3 = time.perf_counter()
        self.output.outputs = outputs  # one assignment: the front end swaps all charts at once
        self.table.value = table
        self.status.value = ""
        self.last_result, self.last_profile, self.last_figures = result, profile, figures
        self.last_error = None
        self.last_timing = {"run": t1 - t0, "charts": t2 - t1, "render": t3 - t2}
        self.redraws += 1
        return True

    def _draw(self, name: str, chart: Any, profile: Profile, result: Any) -> Figure | None:
        if chart == "compare":
            if self.baseline is None:
                return None
            return compare([self.baseline, profile], ["baseline", "current"])
        return chart(result) if getattr(chart, "takes_result", False) else chart(profile)

    def _fail(self, e: BaseException, params: dict) -> None:
        self.last_error = e
        # the learner needs the simulator's message; for other exceptions the type tells what broke
        text = str(e) if isinstance(e, NpuSimError) else f"{type(e).__name__}: {e}"
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
        self.status.value = (
            "<div class='npusim-error' style='border-left:4px solid #cf222e;padding:4px 8px;"
            "background:#fff5f5'>"
            f"<b>{html.escape(type(e).__name__)}</b> with {html.escape(shown)} "
            "(charts below are from the last valid setting)"
            f"<pre style='white-space:pre-wrap;margin:4px 0'>{html.escape(text)}</pre></div>")

    # --- baseline ----------------------------------------------------------------------------------
    def pin(self) -> None:
        """Pin the current profile as the baseline: the metrics table gains a change column."""
        if self.last_profile is None:
            return
        self.baseline, self.baseline_params = self.last_profile, self.params
        self.unpin_button.disabled = False
        self._refresh_after_baseline()

    def unpin(self) -> None:
        """Forget the baseline."""
        self.baseline = self.baseline_params = None
        self.unpin_button.disabled = True
        self._refresh_after_baseline()

    def _refresh_after_baseline(self) -> None:
        if any(chart == "compare" for _, chart in self.charts):
            self.update()  # the compare chart depends on the baseline
        elif self.last_profile is not None:
            self.table.value = metrics_table(self.last_profile, self.baseline, self.metrics)

    # --- display -----------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
