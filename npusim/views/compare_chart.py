"""Two or more launches side by side: kernel time with the speed-up, and every pipe's busy ratio."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from ..errors import UsageError
from ..pipes import PIPE_ORDER
from .style import PIPE_LABELS, SERIES_COLOURS, as_profile, category_labels, figure, legend_above, names
from .style import readable


def compare(profiles: Sequence[Any], labels: Sequence[str] | None = None) -> Figure:
    """Two or more profiles side by side: kernel time (us) with the speed-up relative to the first
    (``time[0] / time[i]``, e.g. ``1.42x``), and the busy ratio of every pipe."""
    profs = [as_profile(p) for p in profiles]
    if len(profs) < 2:
        raise UsageError("compare needs at least two profiles")
    labels_ = names(profs, labels)
    fig = figure(10.0, 3.8)
    ax = fig.add_axes((0.07, 0.2, 0.3, 0.58))
    ax2 = fig.add_axes((0.45, 0.2, 0.53, 0.58))
    colours = [SERIES_COLOURS[i % len(SERIES_COLOURS)] for i in range(len(profs))]
    times = [p.time_us for p in profs]
    bars = ax.bar(range(len(profs)), times, color=colours, gid="time_us")
    speed = [times[0] / t if t else float("inf") for t in times]
    ax.bar_label(bars, labels=[f"{s:.2f}x" for s in speed], fontsize="small", fontweight="bold")
    category_labels(ax, "x", range(len(profs)), labels_, fontsize="small", rotation=15 if len(profs) > 3 else 0)
    ax.set_ylim(0, max(times) * 1.2 or 1)
    ax.set_ylabel("kernel time (us)")
    ax.set_xlabel(f"speed-up vs {labels_[0]} on bars", labelpad=22 if len(profs) <= 3 else 34)
    ax.set_title("time", loc="left", fontsize="medium")
    keys = [p.msprof_name for p in PIPE_ORDER]
    x = np.arange(len(keys))
    w = 0.8 / len(profs)
    for i, (prof, name) in enumerate(zip(profs, labels_)):
        ax2.bar(x - 0.4 + w * (i + 0.5), [prof.pipe_ratio.get(k, 0.0) for k in keys], w, color=colours[i],
                label=name, gid=f"pipe_ratio|{i}")
    category_labels(ax2, "x", x, [PIPE_LABELS[p] for p in PIPE_ORDER], fontsize="small")
    ax2.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax2.set_ylim(0, 1.1)
    ax2.set_ylabel("busy ratio (% of kernel time)")
    ax2.set_xlabel("pipe", labelpad=22)
    ax2.set_title("pipe busy ratio", loc="left", fontsize="medium", pad=26)
    legend_above(ax2, ncols=min(len(profs), 4))
    fig.suptitle(f"{labels_[-1]} vs {labels_[0]}: {speed[-1]:.2f}x", x=0.07, ha="left", fontsize="large")
    return readable(fig)
