"""The checks that lab notebooks call: ``from npusim import checks as check`` then ``check.vector_add(k)``.

A check runs the learner's code on hidden inputs (the lab's adversarial cases, fixed, plus random ones
drawn from the grading seed), verifies the contract it states (types, dtypes, shapes), compares with a
reference at a tolerance suited to the dtype, requires a clean sanitizer run, and where the lab is about
speed or bytes moved, a target a naive answer misses. A pass prints one ``PASSED`` line; a failure says
what differs, on which input, and the likely causes. In a notebook a failure is printed and the notebook
goes on; with ``NPUSIM_STRICT=1`` (grading, tests) it raises :class:`CheckFailed`. Only the learner's own
work passes: the package's answers (one table, :mod:`._answers`) are refused by :mod:`._authorship`.

Each lab's checks live in a module ``labNN*.py`` of this package; every public function of those modules
(listed in its ``__all__``, or not starting with ``_``) is a check available here, and the module's
``HINTS`` (exercise key -> hints, weakest first) feed :func:`hint`. Other modules hold lab code that a
notebook and its checks share (``conv_lab``: lab 04's kernel hooks).
"""

from __future__ import annotations

import importlib
import pkgutil

from .. import tracebacks as _tracebacks
from . import _authorship
from ._core import CheckFailed, NotFinished, hidden_seed, learner_facing, passed, strict
from ._flow import HINTS, Skeleton, finished, hint, mine_or_reference, uses

__all__ = ["CheckFailed", "NotFinished", "passed", "hint", "uses", "mine_or_reference", "finished", "Skeleton",
           "hidden_seed", "strict"]


def _collect() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("lab"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        names = getattr(mod, "__all__", None) or [
            n for n, v in vars(mod).items()
            if callable(v) and not n.startswith("_") and getattr(v, "__module__", "") == mod.__name__
            and not isinstance(v, type)]
        for n in names:
            globals()[n] = learner_facing(getattr(mod, n))
            __all__.append(n)
        for key, ladder in getattr(mod, "HINTS", {}).items():
            if key in HINTS:
                raise RuntimeError(f"hint key {key!r} defined twice ({mod.__name__})")
            HINTS[key] = tuple(ladder)
    _authorship.snapshot()   # what the package defined, before a notebook can reassign any of it


_collect()
_tracebacks.install()  # in a notebook: errors show the learner's frames only
