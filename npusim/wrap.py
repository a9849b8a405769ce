"""Messages a learner reads, wrapped at :data:`WIDTH` characters on word boundaries.

JupyterLab's output area breaks a long line anywhere, so "233 element(s)" can read "2 / 33 element(s)".
Every message the learner sees (a check's failure, a simulator error, a usage error, an unfinished
exercise) goes through :func:`wrap` where it is rendered (``npusim.tracebacks`` and ``npusim.checks``):
lines are broken only at spaces, never inside a word or a number (``1,048,576``, ``0.167``, ``In [15]``),
and a continuation keeps the line's indentation plus two spaces. A single word longer than the width (a
long path) stays whole.
"""

from __future__ import annotations

import re
import textwrap

#: The longest line a message has (characters, not counting colour escapes).
WIDTH = 100
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def visible_len(line: str) -> int:
    """Length of ``line`` as displayed (ANSI colour escapes do not count)."""
    return len(_ANSI.sub("", line))


def wrap_line(line: str, width: int = WIDTH) -> list[str]:
    """One line as lines of at most ``width`` visible characters, broken at spaces only."""
    if visible_len(line) <= width:
        return [line]
    indent = line[: len(line) - len(line.lstrip(" "))]
    # colour escapes: measure without them, then give the first line its escapes back (they only colour the
    # error's name at the start, e.g. "\x1b[31mFAILED\x1b[0m")
    lead = ""
    m = re.match(r"^(\s*(?:\x1b\[[0-9;]*m[^\x1b]*\x1b\[0m))", line)
    if m and _ANSI.search(m.group(1)):
        lead, plain_lead = m.group(1), _ANSI.sub("", m.group(1))
        line = plain_lead + line[len(lead):]
    parts = textwrap.wrap(line, width=width, initial_indent="", subsequent_indent=indent + "  ",
                          break_long_words=False, break_on_hyphens=False, drop_whitespace=True)
    if not parts:
        return [line]
    if lead and parts[0].startswith(_ANSI.sub("", lead)):
        parts[0] = lead + parts[0][len(_ANSI.sub("", lead)):]
    if not parts[0].startswith(indent):
        parts[0] = indent + parts[0]
    return parts


def wrap(text: str, width: int = WIDTH) -> str:
    """``text`` with every line wrapped (:func:`wrap_line`); its own line breaks are kept."""
    return "\n".join(piece for line in str(text).split("\n") for piece in wrap_line(line, width))
