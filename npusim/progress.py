"""Progress of long work (a whole-model run, a long launch): one line updated in place, in a notebook (a
display that is replaced), on the status line of the explorer whose redraw started the work, or in a
terminal (``\\r`` on stderr), and a closing line that stays.

The explorer's status line is a reporter :mod:`npusim.views.explorer` adds to :data:`REPORTERS` (this
module sits below the views and cannot import them).
"""

from __future__ import annotations

import sys
import time
from typing import Callable

#: ``report(text) -> bool``: shows ``text`` somewhere and returns True, or returns False to pass
REPORTERS: list[Callable[[str], bool]] = []


def _report(text: str) -> bool:
    return any(r(text) for r in REPORTERS)


def in_notebook() -> bool:
    """Whether code runs in a Jupyter kernel (where a display can be updated in place)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class Line:
    """One status line, replaced by each :meth:`show`; ``show(text, final=True)`` leaves it in place."""

    def __init__(self) -> None:
        self._handle = None
        self.notebook = in_notebook()

    def show(self, text: str, final: bool = False) -> None:
        if _report(text):
            return
        if self.notebook:
            from IPython.display import Pretty, display

            if self._handle is None:
                self._handle = display(Pretty(text), display_id=True)
            else:
                self._handle.update(Pretty(text))
        else:
            sys.stderr.write("\r" + text.ljust(100) + ("\n" if final else ""))
            sys.stderr.flush()


class Progress:
    """``step(what)`` as each of ``total`` items starts, ``close(summary)`` at the end; nothing when not
    ``enabled``."""

    WIDTH = 30

    def __init__(self, total: int, title: str, enabled: bool = True) -> None:
        self.total, self.title, self.enabled = max(1, total), title, enabled
        self.done = 0
        self.t0 = time.perf_counter()
        self._closed = not enabled
        self._line = Line() if enabled else None
        if enabled and self._line.notebook:   # a terminal gets its first line with the first step
            self._line.show(self._text("starting"))

    def _text(self, what: str) -> str:
        filled = self.WIDTH * self.done // self.total
        return (f"{self.title}: [{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} "
                f"{what} ({time.perf_counter() - self.t0:.1f} s)")

    def step(self, what: str) -> None:
        if self._closed:
            return
        self.done += 1
        self._line.show(self._text(what))

    def close(self, summary: str | None = None) -> None:
        """The closing line (``summary``, or the bar as it stands); later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        self._line.show(f"{self.title}: {summary}" if summary else self._text("stopped"), final=True)


class LaunchProgress:
    """The progress of one launch: how far its blocks have got in simulated time, and how many have ended.

    ``enabled``: True shows it from the start, None once the launch has run for ``AUTO_AFTER_S`` seconds,
    False never. :meth:`tick` is called at every GM DMA (cheap: it looks at the clock every ``EVERY``
    calls); the line is redrawn at most every ``REDRAW_S`` seconds."""

    AUTO_AFTER_S = 2.0
    REDRAW_S = 0.25
    EVERY = 64

    def __init__(self, title: str, blocks: int, cycles_to_us: Callable[[float], float],
                 enabled: bool | None, expected_cycles: float | None = None) -> None:
        self.title, self.blocks, self.to_us = title, blocks, cycles_to_us
        self.enabled = enabled
        self.expected = expected_cycles
        self.t0 = time.perf_counter()
        self.next_draw = self.t0 + (0.0 if enabled else self.AUTO_AFTER_S)
        self.calls = 0
        self.done = 0
        self.sim = 0.0
        self._line = None

    def tick(self, t: float) -> None:
        """A block reached simulated time ``t`` (cycles)."""
        if t > self.sim:
            self.sim = t
        self.calls += 1
        if self.enabled is False or self.calls % self.EVERY:
            return
        now = time.perf_counter()
        if now >= self.next_draw:
            self.next_draw = now + self.REDRAW_S
            self._draw(now)

    def block_done(self, end: float) -> None:
        self.done += 1
        self.tick(end)

    def _text(self, now: float) -> str:
        share = f" ({min(self.sim / self.expected, 0.99):.0%} of the estimate)" if self.expected else ""
        return (f"{self.title}: simulated {self.to_us(self.sim):.1f} us{share}, {self.done}/{self.blocks} "
                f"blocks done ({now - self.t0:.1f} s)")

    def _draw(self, now: float, final: str | None = None) -> None:
        if self._line is None:
            self._line = Line()
        self._line.show(final or self._text(now), final=final is not None)

    def close(self, total_cycles: float) -> None:
        """The closing line, if a line was shown."""
        if self._line is not None:
            now = time.perf_counter()
            self._draw(now, f"{self.title}: done, {self.to_us(total_cycles):.1f} us simulated "
                            f"({now - self.t0:.1f} s)")
