"""Exceptions the simulator raises, one class per kind of mistake real hardware punishes.

Messages follow msSanitizer's spirit: what went wrong, where (buffer or position, address range, pipes,
block), the learner's source line, and a hint saying what to change. Every npusim error carries them as
attributes (``hint``, ``where``, ``facts``) and in its text (``"\\n  at ..."``, ``"\\n  hint: ..."``).
"""

from __future__ import annotations

import warnings


def _no_site() -> str:
    return ""


#: () -> the running kernel's source line, or "" outside a launch (host-side errors name their argument
#: instead). :mod:`npusim.core`, which knows the kernel's frames, installs it: errors sit below the core.
_kernel_site = _no_site


def install_kernel_site(fn) -> None:
    """Make ``fn`` the function that fills in ``where`` of errors raised while a kernel runs."""
    global _kernel_site
    _kernel_site = fn


class NpuSimError(Exception):
    """Base class of every npusim error: a message, where it happened (``where``: the kernel's source
    line, filled in automatically while a kernel runs), a ``hint`` saying what to change, and ``facts``."""

    def __init__(self, message: str = "", *, hint: str = "", where: str = "", **facts):
        self.facts = facts
        self.hint = hint
        self.where = where or _kernel_site()
        self.message = message
        text = message
        if self.where:
            text += f"\n  at {self.where}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)


class UsageError(NpuSimError, ValueError):
    """An API called with arguments it cannot accept (a count <= 0, a tensor at the wrong position...)."""


class SanitizerError(NpuSimError):
    """A mistake the sanitizer caught. ``sanitize="warn"`` turns the recoverable ones into warnings."""

    recoverable = True


class CapacityError(SanitizerError):
    """An on-chip buffer (UB, L1, L0A, L0B, L0C) or the buffer count of a TPipe would overflow."""

    recoverable = False


class AlignmentError(SanitizerError):
    """An address or a length breaks the alignment rule of its memory or instruction."""


class OutOfBoundsError(SanitizerError):
    """An access beyond the end of a GM tensor or of a local tensor, or a negative GM slice."""

    recoverable = False


class TensorStateError(SanitizerError):
    """A local tensor used after free_tensor, before deque, or freed twice."""

    recoverable = False


class QueueError(SanitizerError):
    """More tensors allocated or enqueued than a queue holds, or a deque from an empty queue."""

    recoverable = False


class RaceError(SanitizerError):
    """Two pipes (or cores) touch the same bytes and no queue, flag or barrier orders them."""


class UninitializedReadError(SanitizerError):
    """An instruction reads on-chip bytes that no instruction wrote in this launch (initcheck)."""


class SyncError(SanitizerError):
    """Unpaired set_flag/wait_flag, a bad event id, or a flag set twice."""


class DtypeError(SanitizerError, TypeError):
    """A dtype or dtype pair the chosen hardware does not support (e.g. fp32 on the 910 Cube, or a float64
    array passed to a launch)."""

    recoverable = False


class SanitizerWarning(UserWarning):
    """A sanitizer finding reported as a warning (``sanitize="warn"``)."""


def report(exc: SanitizerError, mode: str) -> None:
    """Raise ``exc``, or warn about it when it is recoverable and mode is "warn". Mode "off" only turns the
    trackers off (races and uninitialised reads are then never detected), so everything reported still
    raises."""
    if mode != "warn" or not exc.recoverable:
        raise exc
    warnings.warn(f"{type(exc).__name__}: {exc}", SanitizerWarning, stacklevel=4)
