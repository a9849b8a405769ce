"""Plain-text and HTML tables: two-column ``(name, value)`` tables (the ``_repr_html_`` of configs and
profiles) and tables of any number of columns (graphs, per-op tables, metrics)."""

from __future__ import annotations

import html
from typing import Sequence


def table(rows, header: tuple[str, str] | None = None) -> str:
    """A two-column HTML table of ``(name, value)`` rows."""
    head = ""
    if header:
        head = (f"<thead><tr><th style='text-align:left'>{html.escape(str(header[0]))}</th>"
                f"<th style='text-align:left'>{html.escape(str(header[1]))}</th></tr></thead>")
    body = "".join(f"<tr><td style='text-align:left'>{html.escape(str(k))}</td>"
                   f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table class='npusim'>{head}<tbody>{body}</tbody></table>"


def text_table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """Columns padded to their widest cell; numbers right-aligned."""
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(header))]
    num = [all(_numeric(r[i]) for r in cells[1:]) and len(cells) > 1 for i in range(len(header))]
    out = []
    for r in cells:
        out.append("  ".join(c.rjust(w[i]) if num[i] else c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
    return "\n".join(out)


def html_table(rows: Sequence[Sequence[object]], header: Sequence[str], title: str = "") -> str:
    """An HTML table (class ``npusim``) with a header row; numbers right-aligned."""
    head = "".join(f"<th style='text-align:left'>{html.escape(str(h))}</th>" for h in header)
    body = []
    for r in rows:
        tds = "".join(f"<td style='text-align:{'right' if _numeric(str(c)) else 'left'}'>{html.escape(str(c))}</td>"
                      for c in r)
        body.append(f"<tr>{tds}</tr>")
    cap = f"<caption style='text-align:left'><b>{html.escape(title)}</b></caption>" if title else ""
    return f"<table class='npusim'>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _numeric(s: str) -> bool:
    s = s.strip().rstrip("%x").replace(",", "").removesuffix(" us").removesuffix(" B")
    try:
        float(s)
        return True
    except ValueError:
        return s in ("", "-")
