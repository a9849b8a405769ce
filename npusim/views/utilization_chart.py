"""Busy ratio per pipe and the Cube's MAC utilisation of a launch."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MultipleLocator, PercentFormatter

from ..pipes import PIPE_ORDER
from .style import PIPE_LABELS, ROLE, as_profile, category_labels, figure, legend_above, pipe_label, value_labels
from .style import readable


def utilization(profile: Any, baseline: Any = None) -> Figure:
    """Busy ratio per pipe (bars are ``profile.pipe_ratio``) and, beside them, the Cube MAC utilization
    (``profile.mac_utilization``). The critical pipe is outlined. ``baseline`` (a Profile): its values are
    drawn as black ticks over the bars."""
    prof = as_profile(profile)
    ratio = prof.pipe_ratio
    keys = [p.msprof_name for p in PIPE_ORDER]
    fig = figure(8.0, 3.4)
    # one axes for both (both are fractions): a second axes would double the tick-drawing cost
    ax = fig.add_axes((0.1, 0.17, 0.86, 0.6))
    heights = [ratio.get(k, 0.0) for k in keys]
    crit = prof.critical_pipe
    bars = ax.bar(range(len(keys)), heights, color=ROLE["achieved"], label="pipe busy ratio (% of kernel time)",
                  gid="pipe_ratio", edgecolor=[ROLE["critical"] if k == crit else "none" for k in keys], linewidth=1.5)
    mac_x = len(keys) + 0.5
    mac = ax.bar([mac_x], [prof.mac_utilization], color=ROLE["mac"],
                 label="Cube MAC utilization (% of peak)", gid="mac_utilization")
    top = max(1.0, *heights, prof.mac_utilization)
    values = None
    if baseline is not None:
        base = as_profile(baseline)
        values = [base.pipe_ratio.get(k, 0.0) for k in keys] + [base.mac_utilization]
        ax.plot([*range(len(keys)), mac_x], values, "_", color=ROLE["baseline"], markersize=22,
                markeredgewidth=2, label="baseline", gid="baseline")
        top = max(top, *values)
    ax.axvline(len(keys) - 0.25, color="#999999", lw=0.8, ls=":")
    value_labels(bars, [f"{h:.0%}" for h in heights], clear_of=values[:-1] if values else None, fontsize="x-small")
    value_labels(mac, [f"{prof.mac_utilization:.0%}"], clear_of=values[-1:] if values else None, fontsize="x-small")
    category_labels(ax, "x", [*range(len(keys)), mac_x], [PIPE_LABELS[p] for p in PIPE_ORDER] + ["Cube MAC"],
                    fontsize="small")
    ax.set_xlim(-0.6, mac_x + 0.6)
    ax.set_ylim(0, top * 1.12)
    ax.yaxis.set_major_locator(MultipleLocator(0.25))
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylabel("busy / utilization (%)")
    ax.set_xlabel("pipe (outlined: critical pipe)", labelpad=22)
    ax.set_title(f"{prof.kernel}: pipe utilization | critical pipe: {pipe_label(crit)}", loc="left",
                 fontsize="medium", pad=22)
    legend_above(ax, ncols=3)
    return readable(fig)
