"""Only the learner's own work passes: while a check runs, the package's answers (the table of
:mod:`npusim.checks._answers`) are refused, whatever name, wrapper or subclass they come under.

Three rules, applied to every check by :func:`npusim.checks._core.learner_facing` and ``run_kernel``:

1. **What is handed in**: the object passed to a check (a function, class, instance, ``functools.partial``,
   bound method, the ``__wrapped__`` chain, and the notebook globals its code names) must not be an
   answer, an alias of one, a subclass or an instance of an answer class, or code copied from one.
2. **What the learner's code calls**: during the check every answer function (and every method of an
   answer class) carries trap code: called from the learner's code it is refused; called from the
   package (the check's own reference run, a helper the lab hands over) it runs as usual. CPython 3.11
   has no ``sys.monitoring``, and ``sys.setprofile`` would slow every call of the simulator; swapping
   ``__code__`` costs nothing except at the answers' own calls.
3. **Who issued each instruction** (kernels): the sanitizer finds each instruction's site
   (:func:`npusim.sanitizer.call_site`); while a check runs the learner's kernel, the frames from that
   site out to the launch must contain no answer, and work done by other package code must come through a
   helper the exercise allows.

A replaced module attribute (``npusim.kernels.softmax.softmax = mine``, a check's oracle swapped for the
learner's function) is found by comparing with what the package defined, and refused too.
"""

from __future__ import annotations

import functools
import os
import sys
import types
from typing import Any, Iterable

from .. import sanitizer
from ..tracebacks import is_package_file, site as _site_text
from . import _answers, _traps
from ._defined import (Refused, _answer, _functions, _learners, _name_of, _nested, _short, _tampered,  # noqa: F401
                       message, snapshot)

_CHECKS_DIR = os.path.dirname(os.path.abspath(__file__))

ANSWER, ALLOWED, CHECK, LEARNER, PACKAGE, TRANSPARENT = "answer", "allowed", "check", "learner", "package", "trap"


# --- the window of one check ----------------------------------------------------------------------------

class Window:
    """What one check refuses while it runs."""

    def __init__(self, exercise: _answers.Exercise | None):
        self.exercise = exercise
        allowed = set(exercise.allowed) if exercise else set()
        self.answers: dict[types.CodeType, str] = {}    # code -> dotted name of the answer
        self.objects: dict[int, str] = {}                # id of an answer object -> dotted name
        self.classes: dict[type, str] = {}
        self.functions: list[tuple[types.FunctionType, str]] = []
        # the exercise's own answers (its table row lists the other exercises' it could hand over too); a
        # check the table does not know refuses every answer
        mine = set(exercise.answers) if exercise else _answers.all_answers()
        for dotted in sorted(mine - allowed):
            a = _answer(dotted, exercise.check if exercise else "check")
            if a is None:
                continue
            self.objects[id(a.obj)] = dotted
            if isinstance(a.obj, type):
                self.classes[a.obj] = dotted
            for f in a.functions:
                # a method of an answer class is named as Class.method in messages
                shown = f"{dotted}.{f.__name__}" if isinstance(a.obj, type) else dotted
                for c in _nested(f.__code__):
                    self.answers.setdefault(c, shown)
                self.functions.append((f, shown))
        self.allowed: set[types.CodeType] = set()
        for dotted in allowed:
            for f in _functions(_answers.resolve(dotted)):
                self.allowed.update(_nested(f.__code__))
        self.kinds: dict[types.CodeType, str] = {}
        self.ok_frame = None    # the innermost kernel frame of the last instruction found the learner's
        self.refusal: Refused | None = None
        self.check = exercise.check if exercise else "check"

    # classification of a frame's code, cached for the window
    def kind(self, code: types.CodeType) -> str:
        k = self.kinds.get(code)
        if k is None:
            if code.co_filename == _traps.TRAP_FILE:
                k = TRANSPARENT
            elif code in self.answers:
                k = ANSWER
            elif code in self.allowed:
                k = ALLOWED
            elif not is_package_file(code.co_filename):
                k = LEARNER
            elif os.path.abspath(code.co_filename).startswith(_CHECKS_DIR + os.sep):
                k = CHECK
            else:
                k = PACKAGE
            self.kinds[code] = k
        return k

    def refuse(self, x: str, dotted: str, where: str) -> None:
        if self.refusal is None:
            self.refusal = Refused(self.check, message(x, _short(dotted), where))
        raise self.refusal

    # rule 2: a call of an answer from the learner's code
    def called(self, dotted: str, caller) -> None:
        if caller is not None and self.kind(caller.f_code) == LEARNER:
            self.refuse(caller.f_code.co_qualname, dotted, _where(caller))

    # rule 3: the frames from an instruction's innermost non-simulator frame out to the launch
    def issued(self, frame) -> None:
        if frame is self.ok_frame:
            return   # the same running call as the last instruction: its callers have not changed
        tolerated = None   # package code (not an answer, not allowed) the work went through: the outermost
        ok = False         # such frame before the learner's is the function the learner called
        f = frame
        kinds, internal = self.kinds, sanitizer._internal_cache   # runs for every instruction: local names
        while f is not None:
            code = f.f_code
            inside = internal.get(code.co_filename)
            if inside is None:
                inside = sanitizer._is_internal(code.co_filename)
            if inside:
                break   # the launch
            k = kinds.get(code) or self.kind(code)
            if k is ANSWER:
                learner = f.f_back
                while learner is not None and self.kind(learner.f_code) != LEARNER and \
                        not sanitizer._is_internal(learner.f_code.co_filename):
                    learner = learner.f_back
                if learner is not None and self.kind(learner.f_code) == LEARNER:
                    self.refuse(learner.f_code.co_qualname, self.answers[f.f_code], _where(learner))
                self.refuse("kernel", self.answers[f.f_code], "")
            if not ok:
                if k is ALLOWED or k is CHECK:
                    ok = True
                elif k is LEARNER:
                    if tolerated is not None:
                        self.refuse(code.co_qualname, _qualname(tolerated), _where(f))
                    ok = True
                elif k is PACKAGE:
                    tolerated = code
            f = f.f_back
        if not ok and tolerated is not None:
            self.refuse("kernel", _qualname(tolerated), "")
        self.ok_frame = frame   # held: a later call cannot get this frame's identity while we keep it

    # rule 1: the objects handed to the check
    def handed(self, args: Iterable[Any], caller=None) -> None:
        """``args``: what the check was given; ``caller``: the learner's frame that called the check (its
        namespace names what was handed in, its line is where)."""
        seen: set[int] = set()
        names = caller.f_globals if caller is not None else {}
        where = _where(caller) if caller is not None else ""
        for arg in args:
            x = next((k for k, v in names.items() if v is arg and not k.startswith("_")), None) or _name_of(arg)
            self._handed(arg, x, where, seen, depth=0)

    def _is_answer(self, obj: Any) -> str | None:
        dotted = self.objects.get(id(obj))
        if dotted is None and isinstance(obj, type):
            dotted = next((self.classes[b] for b in obj.__mro__ if b in self.classes), None)
        return dotted

    def _handed(self, obj: Any, x: str, where: str, seen: set[int], depth: int) -> None:
        if obj is None or id(obj) in seen or depth > 6 or isinstance(obj, (str, bytes, int, float, bool)):
            return
        seen.add(id(obj))
        dotted = self._is_answer(obj)
        if dotted is not None:
            self.refuse(x, dotted, where)   # the answer itself, under any name, or a subclass of it
        if isinstance(obj, functools.partial):
            return self._handed(obj.func, x, where, seen, depth + 1)
        if isinstance(obj, types.MethodType):
            self._handed(obj.__func__, x, where, seen, depth + 1)
            return self._handed(obj.__self__, x, where, seen, depth + 1)
        if isinstance(obj, (staticmethod, classmethod)):
            return self._handed(obj.__func__, x, where, seen, depth + 1)
        if isinstance(obj, (tuple, list)):
            for v in obj[:8]:
                self._handed(v, x, where, seen, depth + 1)
            return
        if isinstance(obj, type):
            if base_is_learners(obj):   # its own methods: one of them may be an answer's
                for k, v in vars(obj).items():
                    self._handed(v, f"{obj.__qualname__}.{k}" if depth else x, where, seen, depth + 1)
            return
        if not isinstance(obj, types.FunctionType):
            dotted = next((self.classes[b] for b in type(obj).__mro__ if b in self.classes), None)
            if dotted is not None:
                self.refuse(x, dotted, where)   # an instance of the answer class
        for f in _functions(obj):
            for c in _nested(f.__code__):
                if c in self.answers:
                    self.refuse(x, self.answers[c], where)   # code copied from an answer
            if is_package_file(f.__code__.co_filename):
                continue
            # the learner's function: the globals its code names (an answer imported under any name)
            g = f.__globals__
            for c in _nested(f.__code__):
                for n in c.co_names:
                    v = g.get(n)
                    if v is None or isinstance(v, types.ModuleType):
                        continue
                    dotted = self._is_answer(v)
                    if dotted is not None:
                        self.refuse(f.__qualname__, dotted, _where_name(c, n))
                    if _learners(v):
                        self._handed(v, _name_of(v), where, seen, depth + 1)
        wrapped = getattr(obj, "__wrapped__", None) or getattr(obj, "_init_fn", None)
        if wrapped is not None and not isinstance(obj, types.FunctionType):
            self._handed(wrapped, x, where, seen, depth + 1)


def _where_name(code: types.CodeType, name: str) -> str:
    """The line of ``code`` that first names the global ``name``."""
    import dis

    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        if ins.starts_line is not None:
            line = ins.starts_line
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval == name:
            break
    return _site_text(code.co_filename, line)


def base_is_learners(cls: type) -> bool:
    return cls.__module__ == "__main__" or not (cls.__module__ or "").startswith(("npusim", "builtins"))


def _qualname(code: types.CodeType) -> str:
    return f"{os.path.splitext(os.path.basename(code.co_filename))[0]}.{code.co_qualname}"


def _where(frame) -> str:
    return _site_text(frame.f_code.co_filename, frame.f_lineno)


_current: list[Window] = []


def _on_call(dotted: str, caller) -> None:
    """An armed answer was called (rule 2): refused when the caller is the learner's code."""
    if _current:
        _current[-1].called(dotted, caller)


class window:
    """``with window(check_name, args):`` around one check: rules 1 and 2, and rule 3 for the kernels that
    ``run_kernel`` launches inside it (:func:`learner_kernel`)."""

    def __init__(self, check: str, args: Iterable[Any]):
        self.check, self.args = check, list(args)

    def __enter__(self) -> Window:
        _tampered(self.check)
        w = Window(_answers.BY_CHECK.get(self.check))
        w.check = self.check
        caller = sys._getframe(1)
        while caller is not None and w.kind(caller.f_code) != LEARNER:
            caller = caller.f_back
        w.handed(self.args, caller)
        self.w = w
        self.armed = _traps.arm(w.functions, _on_call)
        _current.append(w)
        return w

    def __exit__(self, etype, exc, tb) -> bool:
        _current.pop()
        _traps.disarm(self.armed)
        if self.w.refusal is not None and exc is not self.w.refusal:
            raise self.w.refusal.with_traceback(None) from None   # the learner's code swallowed it
        return False


class learner_call:
    """``with learner_call(what):`` around a call of the learner's code inside a check: where the exercise
    is a prediction (lab 00's copy cycles), the learner's code may not run a kernel to measure it."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self) -> None:
        self.before = sanitizer.authorship_watch
        w = _current[-1] if _current else None
        if w is not None and w.exercise is not None and w.exercise.predicts:
            sanitizer.authorship_watch = functools.partial(_measures, w, self.what)

    def __exit__(self, *exc) -> bool:
        sanitizer.authorship_watch = self.before
        return False


def _measures(w: Window, what: str, frame) -> None:
    f = frame
    while f is not None and w.kind(f.f_code) != LEARNER:
        f = f.f_back
    where = f" (at {_where(f)})" if f is not None else ""
    who = f"your `{f.f_code.co_qualname}`" if f is not None else what
    if w.refusal is None:
        w.refusal = Refused(w.check, f"{who} runs a kernel on the simulator{where} to measure the answer: this "
                                     f"exercise is to predict it from the cost model, without running it")
    raise w.refusal


class learner_kernel:
    """``with learner_kernel():`` around a launch of the learner's kernel inside a check: rule 3."""

    def __enter__(self) -> None:
        self.before = sanitizer.authorship_watch
        if _current:
            sanitizer.authorship_watch = _current[-1].issued

    def __exit__(self, *exc) -> bool:
        sanitizer.authorship_watch = self.before
        return False
