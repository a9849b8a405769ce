"""What every check shares: running a learner's kernel on hidden inputs and turning what goes wrong into a
message that says what was expected, what came back, on which input, and what to look at."""

from __future__ import annotations

import os
import traceback
from typing import Any, Callable

import numpy as np

from ..errors import NpuSimError
from ..launch import LaunchResult, launch


class CheckFailed(AssertionError):
    """A check did not pass. The message is written for the learner."""

    def __init__(self, check: str, message: str):
        self.check = check
        super().__init__(f"[{check}] {message}")

    def _render_traceback_(self) -> list[str]:
        # IPython calls this instead of printing a traceback: the learner sees the message, not our frames
        return [f"\x1b[31mCheckFailed\x1b[0m: {self}"]


def passed(check: str, detail: str) -> None:
    """Print the short confirmation of a passed check."""
    print(f"PASSED {check}: {detail}")


def describe(case: dict) -> str:
    """A hidden input described in words (sizes only, never the data)."""
    return ", ".join(f"{k}={v}" for k, v in case.items())


def _user_frame(tb) -> str:
    """file:line of the innermost frame of the learner's code in a traceback."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    where = ""
    for fs in traceback.extract_tb(tb):
        if not os.path.abspath(fs.filename).startswith(pkg):
            where = f"{os.path.basename(fs.filename)}:{fs.lineno} ({fs.line})"
    return where


NOT_FINISHED = ("not finished yet ({e}). Replace the `raise NotImplementedError` line with your code, run the "
                "cell, then this check again.")


def call_learner(check: str, fn: Callable, *args: Any, case: dict | None = None, what: str = "your code",
                 **kwargs: Any) -> Any:
    """Call ``fn`` (the learner's code, or something running it); any problem becomes a
    :class:`CheckFailed` for the learner: not finished, stopped by the simulator (with its message), or
    the learner's own exception (with their line, never our frames)."""
    __tracebackhide__ = True
    where = f" on the hidden input [{describe(case)}]" if case else ""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as e:
        raise CheckFailed(check, NOT_FINISHED.format(e=e)) from None
    except CheckFailed:
        raise
    except NpuSimError as e:
        raise CheckFailed(check, f"{where.strip() or 'here'} the simulator stopped {what} with "
                                 f"{type(e).__name__}:\n{e}") from None
    except Exception as e:  # noqa: BLE001 - the learner's own bug: say where, without our frames
        raise CheckFailed(check, f"{what} raised {type(e).__name__}: {e}{where} at "
                                 f"{_user_frame(e.__traceback__) or 'your code'}") from None


def run_kernel(check: str, kernel: Callable, block_dim: int, *args: Any, case: dict, config=None,
               **kwargs: Any) -> LaunchResult:
    """Launch the learner's kernel with the sanitizer on; any problem becomes a :class:`CheckFailed`."""
    __tracebackhide__ = True
    return call_learner(check, launch, kernel, block_dim, *args, case=case, what="your kernel", config=config,
                        sanitize="error", **kwargs)


def compare(check: str, got: np.ndarray, want: np.ndarray, case: dict, *, rtol: float = 0.0, atol: float = 0.0,
            look_at: str = "") -> None:
    """Fail with the first mismatching element unless ``got`` matches ``want`` within the tolerance."""
    __tracebackhide__ = True
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    if g.shape != w.shape:
        raise CheckFailed(check, f"on [{describe(case)}] the output has shape {g.shape}, expected {w.shape}")
    bad = ~(np.isclose(g, w, rtol=rtol, atol=atol) | (np.isnan(g) & np.isnan(w)))
    if bad.any():
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), g.shape))
        n = int(bad.sum())
        never = int((np.isnan(g) & ~np.isnan(w)).sum())
        pos = idx[0] if len(idx) == 1 else idx
        hint = f" Look at {look_at}." if look_at else ""
        nan = f" ({never} elements are NaN: they were never written, memory starts as NaN)" if never else ""
        raise CheckFailed(check, f"on [{describe(case)}] {n} of {g.size} elements are wrong; the first at "
                                 f"index {pos}: expected {w[idx]:.6g}, got {g[idx]:.6g}{nan}.{hint}")
