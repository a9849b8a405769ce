"""How a check says it did not pass: :class:`CheckFailed` (its message is written for the learner) and
:class:`NotFinished` (the exercise still holds its stub). Apart from ``_core`` so that the authorship rules,
which refuse with a CheckFailed, need not import the checks' machinery."""

from __future__ import annotations

from ..tracebacks import RED, RESET
from ..wrap import wrap


class CheckFailed(AssertionError):
    """A check did not pass. The message is written for the learner."""

    def __init__(self, check: str, message: str):
        self.check = check
        self.message = message
        super().__init__(f"[{check}] {message}")

    def _render_traceback_(self) -> list[str]:
        # IPython calls this instead of printing a traceback: the learner sees the message, not our frames
        return wrap(f"{RED}CheckFailed{RESET}: {self}").split("\n")


class NotFinished(CheckFailed):
    """The exercise a check runs still holds its ``raise NotImplementedError`` stub."""

    def _render_traceback_(self) -> list[str]:
        return wrap(str(self)).split("\n")
