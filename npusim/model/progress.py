"""Progress of a long model run: one line updated in place, in a notebook (a display that is replaced), on
the status line of the explorer whose redraw started the run, or in a terminal (``\\r`` on stderr), and a
closing line that stays."""

from __future__ import annotations

import sys
import time

from ..views.explorer import report_progress


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class Progress:
    """``step(what)`` as each of ``total`` items starts, ``close(summary)`` at the end; nothing when not
    ``enabled``."""

    WIDTH = 30

    def __init__(self, total: int, title: str, enabled: bool = True) -> None:
        self.total, self.title, self.enabled = max(1, total), title, enabled
        self.done = 0
        self.t0 = time.perf_counter()
        self._handle = None
        self._closed = not enabled
        if enabled and _in_notebook() and not report_progress(self._text("starting")):
            from IPython.display import Pretty, display

            self._pretty = Pretty
            self._handle = display(Pretty(self._text("starting")), display_id=True)

    def _text(self, what: str) -> str:
        filled = self.WIDTH * self.done // self.total
        return (f"{self.title}: [{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} "
                f"{what} ({time.perf_counter() - self.t0:.1f} s)")

    def _show(self, text: str, final: bool = False) -> None:
        if report_progress(text):
            return
        if self._handle is not None:
            self._handle.update(self._pretty(text))
        else:
            sys.stderr.write("\r" + text.ljust(100) + ("\n" if final else ""))
            sys.stderr.flush()

    def step(self, what: str) -> None:
        if self._closed:
            return
        self.done += 1
        self._show(self._text(what))

    def close(self, summary: str | None = None) -> None:
        """The closing line (``summary``, or the bar as it stands); later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        self._show(f"{self.title}: {summary}" if summary else self._text("stopped"), final=True)
