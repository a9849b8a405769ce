"""Compact HTML tables for notebooks (``_repr_html_`` of configs, profiles and explorer metrics)."""

from __future__ import annotations

import html


def table(rows, header: tuple[str, str] | None = None) -> str:
    """A two-column HTML table of ``(name, value)`` rows."""
    head = ""
    if header:
        head = (f"<thead><tr><th style='text-align:left'>{html.escape(str(header[0]))}</th>"
                f"<th style='text-align:left'>{html.escape(str(header[1]))}</th></tr></thead>")
    body = "".join(f"<tr><td style='text-align:left'>{html.escape(str(k))}</td>"
                   f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table class='npusim'>{head}<tbody>{body}</tbody></table>"
