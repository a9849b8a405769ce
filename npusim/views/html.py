"""HTML tables of explorer metrics (value, baseline, change); the two-column ``table`` of configs and
profiles is :func:`npusim.tables.table`, below the core that uses it."""

from __future__ import annotations

import html

from ..tables import table  # noqa: F401  (``npusim.views.table``)


# --- metrics with a baseline ------------------------------------------------------------------------

#: Metrics where a smaller value is better (coloured green when they drop) ...
LOWER_IS_BETTER = frozenset({"time_us", "total_cycles"})
#: ... and where a larger one is.
HIGHER_IS_BETTER = frozenset({"mac_utilization", "roofline_efficiency"})


def _is_fraction(key: str) -> bool:
    # fractions shown as percentages: every busy ratio and utilisation, and the L2 hit rate (a "0" beside
    # "0.0%" read as two kinds of number)
    return key.endswith(("_ratio", "_utilization", "_hit_rate")) or key == "roofline_efficiency"


def format_metric(key: str, value: float) -> str:
    """A metric value for display: fractions as percent, counts with thousands separators."""
    if value != value or value in (float("inf"), float("-inf")):  # nan, inf (e.g. no GM traffic)
        return "n/a" if value != value else "inf"
    if _is_fraction(key):
        return f"{value:.1%}"
    if key == "time_us":
        return f"{value:,.3f} us"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3f}"


def format_delta(key: str, value: float, base: float) -> tuple[str, str]:
    """(text, verdict) of the change from ``base`` to ``value``: percentage points for fractions,
    a relative change otherwise, plus the speed-up for times; verdict is "better", "worse" or ""."""
    finite = all(x == x and abs(x) != float("inf") for x in (value, base))
    if not finite:
        return "", ""
    if _is_fraction(key):
        text = f"{(value - base) * 100:+.1f} pp"
    elif base:
        text = f"{(value - base) / abs(base):+.1%}"
        if key in LOWER_IS_BETTER and value:
            text += f" ({base / value:.2f}x)"
    else:
        text = f"{value - base:+,.3g}"
    verdict = ""
    if value != base:
        if key in LOWER_IS_BETTER:
            verdict = "better" if value < base else "worse"
        elif key in HIGHER_IS_BETTER:
            verdict = "better" if value > base else "worse"
    return text, verdict


_FIELD_DOCS = {"total_cycles": "Cycles from the launch start until the last core finished.",
               "instructions": "Instructions executed on the pipes, summed over blocks."}
_COLOUR = {"better": "#1a7f37", "worse": "#cf222e", "": "inherit"}


def metrics_table(profile, baseline=None, keys=None) -> str:
    """HTML table of ``profile.metrics()`` (only ``keys`` if given, in that order); with a ``baseline``
    profile, adds its values and a change column (``time`` also gets the speed-up, e.g. ``(1.42x)``).
    Row titles (hover) are the metric formulas from :func:`npusim.profile.metric_docs`."""
    from ..profile import metric_docs

    docs = {**metric_docs(), **_FIELD_DOCS}
    m = profile.metrics()
    b = baseline.metrics() if baseline is not None else None
    keys = list(keys) if keys is not None else list(m)
    unknown = [k for k in keys if k not in m]
    if unknown:
        from ..errors import UsageError

        raise UsageError(f"unknown metric(s) {unknown}; known: {sorted(m)}")
    cols = ["metric", "value"] + (["baseline", "change"] if b is not None else [])
    head = "".join(f"<th style='text-align:left'>{c}</th>" for c in cols)
    rows = []
    for k in keys:
        doc = docs.get(k) or (docs.get("pipe_ratio", "") if k.endswith("_ratio") else "")
        cells = [f"<td style='text-align:left' title='{html.escape(doc, quote=True)}'>{html.escape(k)}</td>",
                 f"<td style='text-align:right;white-space:nowrap'>{format_metric(k, m[k])}</td>"]
        if b is not None:
            text, verdict = format_delta(k, m[k], b.get(k, float("nan")))
            cells.append(f"<td style='text-align:right;white-space:nowrap'>{format_metric(k, b.get(k, float('nan')))}</td>")
            cells.append(f"<td style='text-align:right;white-space:nowrap;color:{_COLOUR[verdict]}' class='npusim-delta'>"
                         f"{html.escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table class='npusim npusim-metrics'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
