"""Charts of a :class:`~npusim.profile.Profile`: pure functions ``profile(s) -> matplotlib Figure``.

One module per chart (``timeline_chart``, ``utilization_chart``, ``bandwidth_chart``, ``roofline_chart``,
``occupancy_chart``, ``compare_chart``: the ``_chart`` keeps ``views.timeline`` the function, not the
module), sharing :mod:`.style` (figure size, colours, legends); this module gathers them. Every number drawn is read from the profile unchanged (bar heights are
``profile.pipe_ratio`` etc.), so a chart never disagrees with ``summary()``. Artists carry a ``gid``
(``"pipe_ratio"``, ``"achieved_gbps"``, ...) so tests and tools can find them.

A chart that takes ``baseline=`` (a second Profile) fits its axes to both and marks the baseline, so that in
an explorer with a pinned baseline a change shows as a change of length (:class:`~npusim.views.Explorer`
passes it).
"""

from __future__ import annotations

from typing import Callable

from matplotlib.figure import Figure

from ..profile import Profile
from .bandwidth_chart import bandwidth
from .compare_chart import compare
from .occupancy_chart import MEMORIES, occupancy
from .roofline_chart import roofline
from .style import DPI, FAMILIES, PIPE_LABELS, as_profile, family, op_colour, pipe_label, register_notebook_display
from .timeline_chart import DENSE_BARS, N_BINS, timeline
from .utilization_chart import utilization

__all__ = ["CHARTS", "DPI", "DENSE_BARS", "FAMILIES", "MEMORIES", "N_BINS", "PIPE_LABELS", "as_profile",
           "bandwidth", "compare", "family", "occupancy", "op_colour", "pipe_label", "roofline", "timeline",
           "utilization"]

register_notebook_display()

#: Charts by name, for the explorer and other tools.
CHARTS: dict[str, Callable[[Profile], Figure]] = {
    "timeline": timeline, "utilization": utilization, "bandwidth": bandwidth, "roofline": roofline,
    "occupancy": occupancy,
}
