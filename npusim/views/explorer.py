"""A small ipywidgets toolkit: controls bound to a pure ``params -> Profile`` function, redrawing charts.

::

    from npusim.views import Explorer, int_choice, choice
    from npusim.kernels.vector_add import run_vector_add

    ex = Explorer(lambda tile, buffer_num: run_vector_add(x, y, tile=tile, buffer_num=buffer_num),
                  [int_choice("tile", [256, 512, 1024, 2048, 4096]), choice("buffer_num", [1, 2])],
                  charts=("timeline", "utilization"))
    ex  # shows the controls, the charts and a metrics table

The explorer only calls ``fn(**params)``, the chart functions and :func:`~npusim.views.html.metrics_table`:
everything it shows can be had without widgets. While it works, it says "computing ..." and dims the
charts, which stay until the new ones are ready (one swap); a function that raises (e.g. a tile that
overflows UB) shows the error's message and keeps the previous charts. Charts are inline PNGs (no ipympl),
rendered by :func:`npusim.views.render.png_bytes`. A pinned baseline fixes the charts' axes (charts that
take ``baseline=`` are given it). Redraws of settings seen before come from a cache, which any cell run in
the notebook clears (the function may read notebook variables that changed).
"""

from __future__ import annotations

import base64
import html
import time
import weakref
from collections import OrderedDict
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import ipywidgets as w
from matplotlib.figure import Figure

from .. import progress as _progress
from ..errors import NpuSimError, UsageError
from ..profile import Profile
from .charts import CHARTS, compare
from .controls import Control, choice, control_values, int_choice, int_range, result_chart, toggle
from .html import metrics_table
from .render import png_bytes

__all__ = ["BaseExplorer", "Control", "Explorer", "choice", "control_values", "int_choice", "int_range",
           "report_progress", "result_chart", "toggle"]

#: Redraws kept per explorer for settings seen before.
CACHE_SIZE = 32

# dims the charts while a redraw is computed (the front end shows the new ones in one swap)
_STYLE = ("<style>.npusim-busy img{opacity:.45;transition:opacity .15s}"
          ".npusim-computing{color:#57606a;font-style:italic;padding:2px 0}"
          ".npusim-computing:before{content:'';display:inline-block;width:.7em;height:.7em;margin-right:.4em;"
          "border:2px solid #57606a;border-top-color:transparent;border-radius:50%;"
          "animation:npusim-spin .8s linear infinite}"
          "@keyframes npusim-spin{to{transform:rotate(360deg)}}"
          # a metric's value on one line ("14.894 us", "23 up / 23 down"), never broken inside
          "table.npusim td{white-space:nowrap}</style>")


_computing: list["BaseExplorer"] = []   # explorers whose function is running now, innermost last


def report_progress(text: str) -> bool:
    """Show ``text`` on the status line of the explorer whose function is running (a whole-model run or a
    training loop says how far it got); False when no explorer is computing, and the caller reports its own
    way."""
    if not _computing:
        return False
    _computing[-1].status.value = _busy_line(text)
    return True


_progress.REPORTERS.append(report_progress)   # long work shows its progress on the explorer's status line


def _busy_line(text: str) -> str:
    return f"<div class='npusim-computing'>{html.escape(text)}</div>"


def png_output(fig: Figure, dpi: float | None = None) -> dict:
    """An Output-widget display item holding the figure as PNG, as ``display(Image(png))`` would make."""
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(png_bytes(fig, dpi)).decode("ascii"), "text/plain": repr(fig)}}


def _shown(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


class Redraw(NamedTuple):
    """What one redraw shows: the function's result and profile, the figures, their PNG outputs, the
    table's HTML, and the seconds each step took."""

    result: Any
    profile: Any
    figures: dict
    outputs: tuple
    table: str
    timing: dict


_live: "weakref.WeakSet[BaseExplorer]" = weakref.WeakSet()
_hooked = False


def _forget_all(*_: Any) -> None:
    for ex in list(_live):
        ex.forget()


def _hook_cell_runs() -> None:
    """Clear every explorer's cache before a notebook cell runs: the explored functions may read
    variables that the cell changes. Slider moves are not cell runs and keep the cache."""
    global _hooked
    if _hooked:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.events.register("pre_run_cell", _forget_all)
        _hooked = True


def _readable_as_shown(fig: Figure) -> None:
    """A notebook's own chart (a function the lab passes in ``charts``) as the package's charts are: no text
    under the minimum size (matplotlib's default 10 pt reads as 8 CSS pt at 80 dpi), and, since the explorer
    shows a figure uncropped, every text inside it (the axes shrink when a bigger label would be cut)."""
    from ..chartstyle import readable
    from .layout import _fit

    readable(fig)
    _fit(fig)


class BaseExplorer:
    """The widget part every explorer shares: controls, a status line ("computing ...", or the last
    error), charts, a table, a baseline and a cache of redraws. Subclasses implement :meth:`_compute`."""

    def __init__(self, fn: Callable[..., Any], controls: Sequence[Control] | Mapping[str, w.ValueWidget],
                 title: str | None = None, dpi: float | None = None, cache: int = CACHE_SIZE,
                 unpin: bool = True, busy: str | None = None) -> None:
        self.fn = fn
        self.busy = busy
        items = controls.items() if isinstance(controls, Mapping) else [(c.name, c.widget) for c in controls]
        self.controls: dict[str, w.ValueWidget] = dict(items)
        self.dpi = dpi
        self.cache_size = cache
        self._cache: OrderedDict = OrderedDict()
        self.redraws = 0
        self.last_profile: Any = None
        self.last_result: Any = None
        self.last_error: BaseException | None = None
        self.last_figures: dict[str, Figure] = {}
        self.last_timing: dict[str, float] = {}
        self.last_cached = False
        self.baseline: Any = None
        self.baseline_params: dict[str, Any] | None = None
        self._shown_params: dict[str, Any] | None = None
        self._pins = 0  # counts baseline changes: part of the cache key

        self.status = w.HTML()
        self.output = w.Output(layout={"min_height": "200px"})
        self.table = w.HTML()
        self.pin_button = w.Button(description="pin as baseline", icon="thumb-tack",
                                   tooltip="compare later changes against the current result; fixes the axes")
        self.pin_button.on_click(lambda _: self.pin())
        buttons = [self.pin_button]
        self.unpin_button = None
        if unpin:
            self.unpin_button = w.Button(description="clear baseline", disabled=True)
            self.unpin_button.on_click(lambda _: self.unpin())
            buttons.append(self.unpin_button)
        head = [w.HTML(f"<b>{html.escape(title)}</b>")] if title else []
        self.widget = w.VBox([w.HTML(_STYLE), *head,
                              w.HBox([*self.controls.values()], layout={"flex_flow": "row wrap"}),
                              w.HBox(buttons), self.status,
                              # charts at their own size (never squeezed by a wide table, whose text would
                              # shrink under 9 pt): the table goes below them when the row is too narrow
                              w.HBox([self.output, self.table], layout={"align_items": "flex-start",
                                                                        "flex_flow": "row wrap"})])
        self.output.layout.flex = "0 0 auto"
        self.widget.add_class("npusim-explorer")   # a handle for browser tests and screenshots
        for widget in self.controls.values():
            widget.observe(self._on_change, names="value")
        _live.add(self)
        _hook_cell_runs()

    # --- what a subclass provides --------------------------------------------------------------------
    def _done_note(self, params: dict[str, Any], timing: dict, cached: bool) -> str:
        """The status line after a redraw (empty: nothing to say)."""
        return ""

    def _compute(self, params: dict[str, Any], result: Any = None) -> Redraw:
        """Run ``fn(**params)`` (unless ``result`` is given: the setting's result, already computed) and
        draw it."""
        raise NotImplementedError

    # --- state -------------------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        """Current control values, the keyword arguments of ``fn``."""
        return {name: widget.value for name, widget in self.controls.items()}

    def _on_change(self, change: dict) -> None:
        self.update()

    def _key(self, params: dict[str, Any]):
        key = (tuple(params.items()), self._pins)
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def forget(self) -> None:
        """Drop the cached redraws (the next change recomputes)."""
        self._cache.clear()

    def update(self, reuse: bool = False) -> bool:
        """Call ``fn(**params)`` and redraw; on an error show its message and keep the previous charts.
        ``reuse``: redraw the last result without calling ``fn`` (the baseline changed, not the setting).
        Returns True when the charts were redrawn."""
        params = self.params
        key = self._key(params) if self.cache_size else None
        hit = self._cache.get(key) if key is not None else None
        t0 = time.perf_counter()
        if hit is not None:
            self._cache.move_to_end(key)
            self._show(hit, cached=True, timing={"cached": time.perf_counter() - t0})
            return True
        doing = self.busy or f"computing {_shown(params)} ..."
        self.status.value = _busy_line(doing)
        self.output.add_class("npusim-busy")
        _computing.append(self)
        try:
            last = self.last_result if reuse and params == self._shown_params else None
            redraw = self._compute(params, last)
        except Exception as e:  # noqa: BLE001 - any failure is shown in the widget; the kernel must not die
            self.output.remove_class("npusim-busy")
            self._fail(e, params)
            return False
        finally:
            _computing.pop()
        if key is not None:
            self._cache[key] = redraw
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        self._show(redraw, cached=False, timing=redraw.timing)
        return True

    def _show(self, r: Redraw, cached: bool, timing: dict) -> None:
        self.output.outputs = r.outputs  # one assignment: the front end swaps all charts at once
        self.output.remove_class("npusim-busy")
        self.table.value = r.table
        self.status.value = self._done_note(self.params, timing, cached)
        self.last_result, self.last_profile, self.last_figures = r.result, r.profile, r.figures
        self.last_error = None
        self.last_timing, self.last_cached = timing, cached
        self._shown_params = self.params
        self.redraws += 1

    def _fail(self, e: BaseException, params: dict) -> None:
        self.last_error = e
        # the learner needs the simulator's message; for other exceptions the type tells what broke
        text = str(e) if isinstance(e, NpuSimError) else f"{type(e).__name__}: {e}"
        self.status.value = (
            "<div class='npusim-error' style='border-left:4px solid #cf222e;padding:4px 8px;"
            "background:#fff5f5'>"
            f"<b>{html.escape(type(e).__name__)}</b> with {html.escape(_shown(params))} "
            "(charts below are from the last valid setting)"
            f"<pre style='white-space:pre-wrap;margin:4px 0'>{html.escape(text)}</pre></div>")

    # --- baseline ----------------------------------------------------------------------------------
    def pin(self) -> None:
        """Pin the current result as the baseline: the table compares with it and the charts keep its axes."""
        if self.last_profile is None:
            return
        self.baseline, self.baseline_params = self.last_profile, self.params
        self._pins += 1
        if self.unpin_button is not None:
            self.unpin_button.disabled = False
        self.update(reuse=True)

    def unpin(self) -> None:
        """Forget the baseline."""
        self.baseline = self.baseline_params = None
        self._pins += 1
        if self.unpin_button is not None:
            self.unpin_button.disabled = True
        self.update(reuse=True)

    # --- display -----------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def _takes_baseline(fn: Callable) -> bool:
    import inspect

    try:
        return "baseline" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


class Explorer(BaseExplorer):
    """Controls bound to ``fn(**params) -> Profile`` (or a result with ``.profile``), redrawing ``charts``
    and a metrics table whenever a control changes.

    ``charts``: names from :data:`npusim.views.charts.CHARTS` (``"timeline"``, ``"utilization"``,
    ``"bandwidth"``, ``"roofline"``, ``"occupancy"``), ``"compare"`` (the pinned baseline vs the current
    profile; skipped until a baseline is pinned), callables ``Profile -> Figure`` (given ``baseline=``
    too if they take it), or callables marked with :func:`result_chart`, which get ``fn``'s whole result.
    ``metrics``: keys of ``Profile.metrics()`` to tabulate (None: all). ``cache``: redraws kept for
    settings seen before (0: none). ``busy``: what the status line says while ``fn`` runs (default:
    "computing" and the setting), e.g. "training 4 steps on the simulator..." for a function that takes
    seconds.

    For tests and tools: ``controls`` (name -> widget; set ``.value`` to drive it), ``redraws`` (count of
    successful redraws), ``last_profile``, ``last_result``, ``last_error`` (the exception of the last
    failed call, None after a success), ``last_figures`` (name -> Figure of the last redraw),
    ``last_timing`` (seconds of the last redraw: ``run``, ``charts``, ``render``, ``table``; ``cached``
    when it came from the cache), ``last_cached``, ``baseline``.
    """

    def __init__(self, fn: Callable[..., Any], controls: Sequence[Control] | Mapping[str, w.ValueWidget],
                 charts: Sequence[Any] = ("timeline", "utilization"), metrics: Sequence[str] | None = None,
                 dpi: float | None = None, title: str | None = None, cache: int = CACHE_SIZE,
                 busy: str | None = None) -> None:
        self.charts: list[tuple[str, Callable]] = [self._chart(c) for c in charts]
        self.metrics = list(metrics) if metrics is not None else None
        super().__init__(fn, controls, title=title, dpi=dpi, cache=cache, busy=busy)
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

    def _compute(self, params: dict[str, Any], result: Any = None) -> Redraw:
        t0 = time.perf_counter()
        result = self.fn(**params) if result is None else result
        profile = result.profile if hasattr(result, "profile") else result
        if not isinstance(profile, Profile):
            raise UsageError(f"the explored function returned {type(result).__name__}, not a Profile "
                             "or a result with .profile")
        t1 = time.perf_counter()
        figures = {name: self._draw(chart, profile, result) for name, chart in self.charts}
        figures = {k: f for k, f in figures.items() if f is not None}
        t2 = time.perf_counter()
        outputs = tuple(png_output(f, self.dpi) for f in figures.values())
        t3 = time.perf_counter()
        table = metrics_table(profile, self.baseline, self.metrics)
        t4 = time.perf_counter()
        return Redraw(result, profile, figures, outputs, table,
                      {"run": t1 - t0, "charts": t2 - t1, "render": t3 - t2, "table": t4 - t3})

    def _draw(self, chart: Any, profile: Profile, result: Any) -> Figure | None:
        if chart == "compare":
            if self.baseline is None:
                return None
            return compare([self.baseline, profile], ["baseline", "current"])
        arg = result if getattr(chart, "takes_result", False) else profile
        if self.baseline is not None and _takes_baseline(chart):
            fig = chart(arg, baseline=self.baseline)
        else:
            fig = chart(arg)
        if isinstance(fig, Figure) and not getattr(chart, "__module__", "").startswith("npusim."):
            _readable_as_shown(fig)
        return fig
