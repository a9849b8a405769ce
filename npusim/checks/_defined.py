"""What the package defined, for :mod:`npusim.checks._authorship`: the answers of the table resolved once
(before a notebook can reassign them), and the check that every name the checks rely on still holds the
package's own object when a check starts.
"""

from __future__ import annotations

import functools
import os
import sys
import types
from typing import Any, Iterable

from .. import sanitizer
from . import _answers, _traps
from ._failure import CheckFailed

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Refused(CheckFailed):
    """The learner's object is, or hands its work to, the package's answer."""


def message(x: str, y: str, where: str) -> str:
    """The one refusal message of every check."""
    at = f" (called at {where})" if where else ""
    return f"your `{x}` hands the work to npusim's `{y}`{at}: this exercise is to write it yourself"


def _functions(obj: Any) -> Iterable[types.FunctionType]:
    """The Python functions whose code is ``obj``'s: a function (through ``__wrapped__`` and torch's
    ``_init_fn``), or the methods a class defines itself (not the ones it inherits)."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        for f in (obj.fget, obj.fset, obj.fdel):
            if f is not None:
                yield from _functions(f)
        return
    if isinstance(obj, type):
        for v in vars(obj).values():
            f = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
            if isinstance(f, types.FunctionType) and f.__qualname__.startswith(obj.__qualname__ + "."):
                yield f
            elif isinstance(v, property):
                yield from _functions(v)
        return
    seen = set()
    while obj is not None and id(obj) not in seen:
        seen.add(id(obj))
        if isinstance(obj, types.FunctionType):
            yield obj
        obj = getattr(obj, "__wrapped__", None) or getattr(obj, "_init_fn", None)


def _nested(code: types.CodeType) -> Iterable[types.CodeType]:
    stack = [code]
    while stack:
        c = stack.pop()
        yield c
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


def _short(dotted: str) -> str:
    """``vector_add``, ``Im2colConv.expected_params``: how the message names an answer."""
    parts = dotted.split(".")
    return ".".join(parts[-2:]) if len(parts) > 2 and parts[-2][:1].isupper() else parts[-1]


class _Answer:
    """One dotted name of the table, as the package defined it."""

    __slots__ = ("dotted", "obj", "codes", "functions", "members")

    def __init__(self, dotted: str, obj: Any):
        self.dotted, self.obj = dotted, obj
        self.functions = [f for f in _functions(obj) if _in_package(f.__code__.co_filename)]
        self.codes = {c for f in self.functions for c in _nested(f.__code__)}
        self.members = dict(vars(obj)) if isinstance(obj, type) else {}   # a class's own methods, as defined


def _in_package(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PKG_DIR + os.sep)


_defined: dict[str, _Answer] = {}


def _genuine(obj: Any) -> bool:
    """Whether ``obj`` is the package's own (defined in npusim's files), not the learner's."""
    if isinstance(obj, types.ModuleType):
        return _in_package(getattr(obj, "__file__", "") or "")
    if isinstance(obj, type):
        return (obj.__module__ or "").startswith("npusim")
    fns = list(_functions(obj))
    return all(_in_package(f.__code__.co_filename) for f in fns) if fns else True


def _answer(dotted: str, check: str = "check") -> _Answer | None:
    """The answer as the package defined it: resolved when the checks load, or by the first check that
    needs it when its module was not loaded then (refused when it is no longer the package's own)."""
    a = _defined.get(dotted)
    if a is None:
        obj = _answers.resolve(dotted)
        if not _genuine(obj):
            raise Refused(check, f"npusim's `{dotted}` was replaced by code defined outside the package "
                                        f"(an assignment to it?): restart the kernel so the check can compare "
                                        f"with the package's own")
        a = _defined[dotted] = _Answer(dotted, obj)
    return a


def snapshot() -> None:
    """Remember what the package defined: every answer whose module needs no torch. Called when the checks
    load, before a notebook can reassign any of it."""
    for dotted in sorted(_answers.all_answers()):
        if not _answers.loaded(dotted):
            continue   # resolved by the first check that needs it (importing torch here would be slow)
        try:
            _answer(dotted)
        except Refused:
            pass   # replaced before the checks were imported: the first check that needs it says so


def _learners(v: Any) -> bool:
    """Whether ``v`` is a function or class defined in the learner's code (a notebook cell, their file)."""
    if isinstance(v, functools.partial):
        v = v.func
    if isinstance(v, types.MethodType):
        v = v.__func__
    if (getattr(v, "__module__", None) or "").startswith("npusim"):
        return False   # the quick answer for nearly every value: the package's own
    if isinstance(v, types.FunctionType):
        return not sanitizer._is_library(v.__code__.co_filename)   # cached per file
    if isinstance(v, type):
        mod = sys.modules.get(v.__module__ or "")
        return v.__module__ == "__main__" or (mod is not None and not sanitizer._is_library(
            getattr(mod, "__file__", None) or "<built-in>"))
    return False


def _tampered(check: str) -> None:
    """Refuse when a name the checks rely on no longer holds the package's object: an answer replaced (or
    its ``__code__``, or a method of an answer class), or any function or class of a package module (a
    check's oracle, a re-export) replaced by one the learner wrote."""
    for dotted, a in list(_defined.items()):
        now = _answers.resolve(dotted)
        codes_now = [f.__code__ for f in _functions(now)]
        if now is not a.obj or any(c not in a.codes for c in codes_now if c.co_filename != _traps.TRAP_FILE) or \
                any(vars(now).get(k) is not v for k, v in a.members.items()):
            raise Refused(check, f"npusim's `{dotted}` was replaced by your notebook (an assignment to it or to "
                                 f"its __code__): the check compares with the package's own. Restart the kernel "
                                 f"and run the notebook without that assignment")
    kinds = {types.FunctionType, functools.partial, types.MethodType}
    for modname in [m for m in sys.modules if m.startswith("npusim.")]:   # no tuple per value: no GC pauses
        mod = sys.modules.get(modname)
        for v in (vars(mod).values() if mod is not None else ()):
            t = type(v)   # not isinstance: some values (torch's op namespaces) make it slow
            if (t in kinds or issubclass(t, type)) and _learners(v):
                k = next(k for k, w in vars(mod).items() if w is v)
                raise Refused(check, f"`{modname}.{k}` was replaced by your notebook's `{_name_of(v)}`: the "
                                     f"checks rely on the package's own. Restart the kernel and run the notebook "
                                     f"without that assignment")


def _name_of(obj: Any) -> str:
    for o in (obj, getattr(obj, "func", None), getattr(obj, "__func__", None)):
        n = getattr(o, "__qualname__", None) or getattr(o, "__name__", None)
        if isinstance(n, str):
            return n
    return type(obj).__name__


