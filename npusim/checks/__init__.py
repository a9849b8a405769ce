"""The checks that lab notebooks call: ``from npusim import checks as check`` then ``check.vector_add(k)``.

A check runs the learner's code on hidden inputs (odd sizes, tails, one element, the largest that fits),
compares with a reference at a tolerance suited to the dtype, requires a clean sanitizer run, and where the
lab is about speed, a performance target. A failure raises :class:`CheckFailed` saying what was expected,
what came back, on which input, and what to look at; a pass prints one line.

Each lab's checks live in a module ``labNN*.py`` of this package; every public function of those modules
(listed in its ``__all__``, or not starting with ``_``) is a check available here. Other modules hold
lab code that a notebook and its checks share (``conv_lab``: lab 04's kernel hooks).
"""

from __future__ import annotations

import importlib
import pkgutil

from ._core import CheckFailed, passed

__all__ = ["CheckFailed", "passed"]


def _collect() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("lab"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        names = getattr(mod, "__all__", None) or [
            n for n, v in vars(mod).items()
            if callable(v) and not n.startswith("_") and getattr(v, "__module__", "") == mod.__name__]
        for n in names:
            globals()[n] = getattr(mod, n)
            __all__.append(n)


_collect()
