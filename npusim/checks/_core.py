"""What every check shares: running a learner's code on hidden inputs, drawing the random ones from the
grading seed, and turning what goes wrong into a message that says what differs, on which input, and
what the likely causes are.

A check is a function of a lab module that raises :class:`CheckFailed`. The package exports it wrapped by
:func:`learner_facing`: in a notebook a failure is printed (in red) and the notebook goes on, so Run All
reaches the end; with ``NPUSIM_STRICT=1`` (set by ``npusim grade`` and by the test suite) it raises.
"""

from __future__ import annotations

import functools
import os
import sys
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..tracebacks import RED, RESET, innermost_learner_site
from ._failure import CheckFailed, NotFinished
from ..errors import NpuSimError
from ..wrap import wrap
from ..launch import LaunchResult, launch

SEED_ENV = "NPUSIM_CHECK_SEED"
STRICT_ENV = "NPUSIM_STRICT"


def strict() -> bool:
    """Whether failing checks raise (grading, tests) instead of printing and letting the notebook go on."""
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def hidden_seed() -> int:
    """The seed of the random hidden inputs: 0 for a learner's own runs, a secret one when graded."""
    raw = os.environ.get(SEED_ENV, "0").strip() or "0"
    try:
        return int(raw)
    except ValueError:
        return zlib.crc32(raw.encode())


def case_rng(check: str, case: int | str) -> np.random.Generator:
    """A random generator for one hidden input of one check, drawn from :func:`hidden_seed`: the same
    inputs on every self-check, other ones under ``npusim grade``'s secret seed."""
    return np.random.default_rng([hidden_seed(), zlib.crc32(check.encode()), zlib.crc32(str(case).encode())])


def fixed_rng(check: str, case: int | str) -> np.random.Generator:
    """A random generator for a *fixed* adversarial input: the same data whatever the grading seed."""
    return np.random.default_rng([zlib.crc32(check.encode()), zlib.crc32(str(case).encode())])


def passed(check: str, detail: str) -> None:
    """Print the short confirmation of a passed check (grading scores a check by this line)."""
    print(f"PASSED {check}: {detail}")


def show_failure(e: CheckFailed) -> None:
    """How a failing check looks in a notebook: one line when unfinished, else its message in red."""
    if isinstance(e, NotFinished):
        print(wrap(f"{e.check}: {e.message}"))
    else:
        print(wrap(f"{RED}FAILED{RESET} {e.check}: {e.message}"), file=sys.stderr)


def learner_facing(fn: Callable[..., None]) -> Callable[..., None]:
    """Wrap a check for notebooks: a failure is shown and the notebook goes on; strict mode raises. While it
    runs, only the learner's own work passes (:mod:`npusim.checks._authorship`)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        __tracebackhide__ = True
        from . import _authorship  # (it imports this module)

        try:
            with _authorship.window(fn.__name__, [*args, *kwargs.values()]):
                fn(*args, **kwargs)
        except CheckFailed as e:
            if strict():
                raise
            show_failure(e)

    run.__wrapped_check__ = fn
    return run


def describe(case: dict) -> str:
    """A hidden input described in words (sizes only, never the data)."""
    return ", ".join(f"{k}={v}" for k, v in case.items())


def call_learner(check: str, fn: Callable, *args: Any, case: dict | None = None, what: str = "your code",
                 explain: dict[type, str] | None = None, **kwargs: Any) -> Any:
    """Call ``fn`` (the learner's code, or something running it); any problem becomes a
    :class:`CheckFailed` for the learner: not finished, stopped by the simulator (with its message and the
    learner's line), or the learner's own exception (with their line, never our frames). ``explain``
    maps an exception type to what it most likely means in this exercise (appended to the message)."""
    __tracebackhide__ = True
    from . import _authorship

    where = f" on the hidden input [{describe(case)}]" if case else ""
    try:
        with _authorship.learner_call(what):
            return fn(*args, **kwargs)
    except NotImplementedError as e:
        raise NotFinished(check, f"not finished yet: {str(e).strip() or 'the exercise'}") from None
    except CheckFailed:
        raise
    except NpuSimError as e:
        raise CheckFailed(check, f"{where.strip() or 'here'} the simulator stopped {what} with "
                                 f"{type(e).__name__}:\n{e}") from None
    except Exception as e:  # noqa: BLE001 - the learner's own bug: say where, without our frames
        extra = next((f" {v}" for k, v in (explain or {}).items() if isinstance(e, k)), "")
        raise CheckFailed(check, f"{what} raised {type(e).__name__}: {e}{where} at "
                                 f"{innermost_learner_site(e.__traceback__) or 'your code'}.{extra}") from None


def run_kernel(check: str, kernel: Callable, block_dim: int, *args: Any, case: dict, config=None,
               explain: dict[type, str] | None = None, **kwargs: Any) -> LaunchResult:
    """Launch the learner's kernel with the sanitizer on; any problem becomes a :class:`CheckFailed`. Every
    instruction must be the learner's own or a helper's the exercise allows (rule 3 of
    :mod:`npusim.checks._authorship`)."""
    __tracebackhide__ = True
    from . import _authorship

    with _authorship.learner_kernel():
        return call_learner(check, launch, kernel, block_dim, *args, case=case, what="your kernel",
                            config=config, sanitize="error", explain=explain, **kwargs)


# --- what differs: the failure's signature -------------------------------------------------------------

@dataclass
class Mismatch:
    """Where ``got`` differs from ``want`` (flattened, in element order)."""

    bad: np.ndarray          # boolean mask over the flattened output
    got: np.ndarray
    want: np.ndarray
    shape: tuple

    @property
    def count(self) -> int:
        return int(self.bad.sum())

    @property
    def size(self) -> int:
        return int(self.bad.size)

    @property
    def first(self) -> int:
        return int(np.argmax(self.bad))

    @property
    def last(self) -> int:
        return int(self.bad.size - 1 - np.argmax(self.bad[::-1]))

    @property
    def never_written(self) -> int:
        """Elements still NaN where a finite value was expected (outputs start as NaN in the checks)."""
        return int((np.isnan(self.got) & ~np.isnan(self.want)).sum())

    @property
    def non_finite(self) -> int:
        return int((~np.isfinite(self.got) & np.isfinite(self.want)).sum())

    def runs(self) -> list[tuple[int, int]]:
        """Contiguous ranges ``[lo, hi)`` of wrong elements."""
        b = np.concatenate(([False], self.bad, [False])).astype(np.int8)
        edges = np.flatnonzero(np.diff(b))
        return [(int(lo), int(hi)) for lo, hi in zip(edges[::2], edges[1::2])]

    def only_in(self, lo: int, hi: int) -> bool:
        """Every wrong element lies in ``[lo, hi)``."""
        idx = np.flatnonzero(self.bad)
        return bool(idx.size) and int(idx.min()) >= lo and int(idx.max()) < hi

    def index(self, flat: int):
        idx = tuple(int(i) for i in np.unravel_index(flat, self.shape))
        return idx[0] if len(idx) == 1 else idx

    def where(self) -> str:
        """Which elements are wrong, in words."""
        n, size = self.count, self.size
        if n == size:
            return f"all {size:,} elements are wrong"
        runs = self.runs()
        if len(runs) == 1:
            lo, hi = runs[0]
            span = f"element {self.index(lo)}" if hi - lo == 1 else \
                f"elements {self.index(lo)} to {self.index(hi - 1)}"
            tail = " (the last ones)" if hi == size else " (the first ones)" if lo == 0 else ""
            return f"{n:,} of {size:,} elements are wrong: {span}{tail}"
        return (f"{n:,} of {size:,} elements are wrong, in {len(runs)} separate runs (the first from index "
                f"{self.index(runs[0][0])}, the last ending at {self.index(runs[-1][1] - 1)})")

    def example(self) -> str:
        i = self.first
        return f"at index {self.index(i)} expected {self.want[i]:.6g}, got {self.got[i]:.6g}"


def mismatch(got: np.ndarray, want: np.ndarray, *, rtol: float = 0.0, atol: float = 0.0) -> Mismatch | None:
    """None when ``got`` matches ``want`` within the tolerance (NaN matching NaN), else the signature."""
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.isclose(g, w, rtol=rtol, atol=atol) | (np.isnan(g) & np.isnan(w)) | \
            (np.isinf(g) & np.isinf(w) & (np.sign(g) == np.sign(w)))
    if ok.all():
        return None
    return Mismatch(~ok.reshape(-1), g.reshape(-1), w.reshape(-1), g.shape)


def check_output(check: str, got: Any, *, shape: tuple, dtype, what: str = "the output") -> np.ndarray:
    """The stated contract of an output: an array of ``shape`` and ``dtype`` (raises with what differs)."""
    __tracebackhide__ = True
    if not isinstance(got, np.ndarray):
        raise CheckFailed(check, f"{what} must be a numpy array of shape {shape} and dtype "
                                 f"{np.dtype(dtype).name}, got {type(got).__name__}")
    if got.shape != tuple(shape):
        raise CheckFailed(check, f"{what} has shape {got.shape}, expected {tuple(shape)}")
    if got.dtype != np.dtype(dtype):
        raise CheckFailed(check, f"{what} has dtype {got.dtype.name}, expected {np.dtype(dtype).name}")
    return got


def compare(check: str, got: np.ndarray, want: np.ndarray, case: dict, *, rtol: float = 0.0, atol: float = 0.0,
            causes: Callable[[Mismatch], str] | str = "", look_at: str = "") -> None:
    """Fail unless ``got`` matches ``want``: the message says which elements are wrong, one example, NaN
    counts, and the likely causes that ``causes(mismatch)`` derives from that signature."""
    __tracebackhide__ = True
    g = np.asarray(got)
    if g.shape != np.shape(want):
        raise CheckFailed(check, f"on [{describe(case)}] the output has shape {g.shape}, expected {np.shape(want)}")
    mm = mismatch(g, want, rtol=rtol, atol=atol)
    if mm is None:
        return
    nan = (f" {mm.never_written:,} of them are NaN: never written (outputs start as NaN here)."
           if mm.never_written else "")
    why = causes(mm) if callable(causes) else causes or (f"Look at {look_at}." if look_at else "")
    raise CheckFailed(check, f"on [{describe(case)}] {mm.where()}; {mm.example()}.{nan}"
                             + (f" {why}" if why else ""))


def as_int(check: str, value: Any, what: str) -> int:
    """A learner's answer that must be a whole number (an int or an integral numpy scalar)."""
    __tracebackhide__ = True
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise CheckFailed(check, f"{what} must be an int, got {type(value).__name__} {value!r}")
    return int(value)
