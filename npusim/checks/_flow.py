"""How a lab flows when some exercises are not finished: Run All always reaches the end.

- ``with check.uses("exercise 1"):`` around a cell that runs the learner's code: an unfinished exercise
  gives one line and the cell is skipped; any other error is shown briefly (in red) and the notebook goes
  on. In strict mode (grading, tests) everything is raised as usual.
- ``check.mine_or_reference("vector-add", add_kernel)``: what an explorer should run: the learner's code
  once the exercise (named by its hint key) is finished, the package's stand-in until then (saying so in
  one line; the stand-ins are listed in :mod:`npusim.checks._answers`).
- ``check.hint("vector-add", 2)``: the hint ladder of an exercise (direction, approach, nearly the code).
"""

from __future__ import annotations

import functools
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..tracebacks import RED, RESET, compact, is_unfinished, unfinished_line
from ._core import CheckFailed, show_failure, strict


class uses:
    """Context manager for a cell that runs an exercise's code (see the module docstring)."""

    def __init__(self, exercise: str):
        self.exercise = exercise

    def __enter__(self) -> "uses":
        return self

    def __exit__(self, etype, exc, tb) -> bool:
        if exc is None or strict() or not isinstance(exc, Exception):
            return False
        if isinstance(exc, CheckFailed):
            show_failure(exc)
        elif is_unfinished(exc):
            verb = "are" if self.exercise.startswith("exercises") else "is"   # "exercises 1 to 3 are ..."
            print(f"{self.exercise} {verb} {unfinished_line(exc)}; this cell needs it and was skipped, the "
                  f"notebook goes on.")
        else:
            print("\n".join(compact(exc)), file=sys.stderr)
            print(f"{RED}(this cell stopped; the cells below still run){RESET}", file=sys.stderr)
        return True


def _own_objects(obj: Any, seen: set[int]) -> Iterable[types.CodeType]:
    """Code objects of ``obj`` and of the notebook-defined functions and classes it refers to."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, functools.partial):
        yield from _own_objects(obj.func, seen)
        return
    code = getattr(obj, "__code__", None)
    if isinstance(obj, type):
        if obj.__module__ != "__main__":
            return
        for base in obj.__mro__[1:]:
            if base.__module__ == "__main__":
                yield from _own_objects(base, seen)
        for v in vars(obj).values():
            yield from _own_objects(v, seen)
        return
    wrapped = getattr(obj, "__wrapped__", None)
    if wrapped is not None:
        yield from _own_objects(wrapped, seen)
    if code is None:
        return
    stack = [code]
    while stack:
        c = stack.pop()
        yield c
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    for name in _names(code):
        target = getattr(obj, "__globals__", {}).get(name)
        if target is not None and getattr(target, "__module__", None) == "__main__":
            yield from _own_objects(target, seen)


def _names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for k in code.co_consts:
        if isinstance(k, types.CodeType):
            out |= _names(k)
    return out


def finished(*objs: Any) -> bool:
    """False while any of ``objs`` (functions, classes, kernels), or a notebook-defined function or class
    they use, still holds a ``raise NotImplementedError`` stub."""
    seen: set[int] = set()
    for obj in objs:
        for code in _own_objects(obj, seen):
            if "NotImplementedError" in code.co_names:
                return False
    return True


def mine_or_reference(exercise: str, mine: Any, *old: Any) -> Any:
    """What an explorer should run: ``mine`` once the exercise ``exercise`` (its hint key) is finished, else
    the package's stand-in for it (saying so in one line), e.g. ``mine_or_reference("vector-add",
    add_kernel)``. The lab never imports the stand-in itself: its answers stay out of the learner's hands."""
    from ._answers import BY_KEY, resolve

    if old or not isinstance(exercise, str):
        raise TypeError("mine_or_reference takes the exercise's hint key and your object, e.g. "
                        "check.mine_or_reference(\"vector-add\", add_kernel): the reference comes from the package")
    ex = BY_KEY.get(exercise)
    if ex is None or ex.stand_in is None:
        known = sorted(k for k, e in BY_KEY.items() if e.stand_in)
        raise KeyError(f"no stand-in for {exercise!r}; exercises with one: {', '.join(known)}")
    if finished(mine):
        return mine
    from ..wrap import wrap

    print(wrap(f"{exercise}: not finished yet, so this cell uses the package's version (finish it, then run this "
               f"cell again to use yours)."))   # at 100 characters: the browser would break it inside a word
    return resolve(ex.stand_in)


# --- hints ----------------------------------------------------------------------------------------------

BLANK = "___"
"""How a blank is written in a level-3 skeleton."""


@dataclass(frozen=True)
class Skeleton:
    """A level-3 hint: code whose blanks (``___``) are the skill (loop bounds, offsets, the flag pair, the
    formula), never one obvious token. ``setup`` is the code (imports, the lab's inputs) the skeleton needs
    to run outside the notebook; ``cells`` the ids of the lab's solution cells to run before it (the import
    cell, the given plumbing, earlier exercises it builds on); ``call`` is the expression that checks what
    it defines, e.g. ``"check.vector_add(add_kernel)"``. The test suite fills the blanks with the simplest
    tokens that fit and asserts that this does not pass."""

    code: str
    call: str
    setup: str = "from npusim import checks as check"
    intro: str = ""
    cells: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.intro}\n{self.code}" if self.intro else self.code


HINTS: dict[str, tuple[str | Skeleton, ...]] = {}
"""exercise key -> its hints, weakest first (collected from the lab modules' ``HINTS``): a direction, the
approach without its key step, then a :class:`Skeleton`."""


def hint(exercise: str, level: int = 1) -> None:
    """Print hint ``level`` (1 = a direction, higher = closer to the code) of an exercise."""
    ladder = HINTS.get(exercise)
    if ladder is None:
        raise KeyError(f"no hints for {exercise!r}; exercises with hints: {', '.join(sorted(HINTS))}")
    if not isinstance(level, int) or not 1 <= level <= len(ladder):
        raise ValueError(f"{exercise!r} has hint levels 1 to {len(ladder)}, not {level!r}")
    more = (f"  (stronger: check.hint({exercise!r}, {level + 1}))" if level < len(ladder) else "")
    print(f"Hint {level} of {len(ladder)} for {exercise}:\n{ladder[level - 1]}{more}")
