"""The visual layer: charts of a profile, Chrome/Perfetto traces, and widgets to explore parameters.

::

    from npusim import views
    fig = views.timeline(profile)              # a matplotlib Figure; shows inline in a notebook
    views.to_chrome_trace(profile, "t.json")   # open in ui.perfetto.dev
    views.Explorer(fn, [views.int_choice("tile", [256, 512, 1024])], charts=("timeline",))

Names load on first use, so that ``from npusim.views import metrics_table`` does not pay for matplotlib or
ipywidgets.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load lazily below
    from .charts import CHARTS, bandwidth, compare, occupancy, roofline, timeline, utilization
    from .diagram import core_diagram
    from .explorer import Control, Explorer, choice, int_choice, int_range, result_chart, toggle
    from .html import metrics_table, table
    from .layout import layout_problems, tidy
    from .style import use_palette
    from .trace import TraceBuilder, to_chrome_trace

_WHERE = {
    **dict.fromkeys(("CHARTS", "bandwidth", "compare", "occupancy", "roofline", "timeline", "utilization"),
                    "charts"),
    **dict.fromkeys(("metrics_table", "table"), "html"),
    **dict.fromkeys(("TraceBuilder", "to_chrome_trace"), "trace"),
    **dict.fromkeys(("Explorer", "Control", "int_choice", "int_range", "choice", "toggle", "result_chart"),
                    "explorer"),
    "core_diagram": "diagram",
    "use_palette": "style",
    **dict.fromkeys(("layout_problems", "tidy"), "layout"),
}

__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'npusim.views' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
