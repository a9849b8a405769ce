"""Trap code for the package's answers while a check runs (rule 2 of :mod:`npusim.checks._authorship`).

CPython 3.11 has no ``sys.monitoring``, and ``sys.setprofile`` would slow every call of the simulator. So
each answer function gets, for the check's duration, a ``__code__`` with its own parameters that reports
the call (and its caller's frame) and then runs the original: nothing costs more except the answers' own
calls, and a signature, defaults and a launch's binding of arguments by name stay as they were.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any, Callable

TRAP_FILE = "<npusim answer trap>"

_TRAPS: dict[int, tuple[types.FunctionType, str, Callable]] = {}   # key -> (the original, dotted, on_call)
_trap_code: dict[int, types.CodeType] = {}


def _dispatch(key: int, args: tuple, kwargs: dict) -> Any:
    original, dotted, on_call = _TRAPS[key]
    on_call(dotted, sys._getframe(2))   # frame 1 is the trap's, 2 its caller
    return original(*args, **kwargs)


def _make_trap(key: int, fn: types.FunctionType) -> types.CodeType:
    """Code for ``fn.__code__`` that asks :func:`_dispatch`: the same parameters (so ``fn``'s defaults,
    its signature and a launch's binding of arguments by name stay as they were), and as many free
    variables as ``fn``'s code (a function's closure must match its code), never read."""
    code = fn.__code__
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    pos, kwonly = list(names[:n_pos]), list(names[n_pos:n_pos + n_kw])
    at = n_pos + n_kw
    star = names[at] if code.co_flags & inspect.CO_VARARGS else None
    at += bool(star)
    starstar = names[at] if code.co_flags & inspect.CO_VARKEYWORDS else None
    params = list(pos)
    if code.co_posonlyargcount:
        params.insert(code.co_posonlyargcount, "/")
    if star or kwonly:
        params.append(f"*{star}" if star else "*")
    params += kwonly
    if starstar:
        params.append(f"**{starstar}")
    args = "(" + "".join(f"{p}, " for p in pos) + (f"*{star}" if star else "") + ")"
    kwargs = "{" + "".join(f"{k!r}: {k}, " for k in kwonly) + (f"**{starstar}" if starstar else "") + "}"
    free = [f"__npusim_f{i}" for i in range(len(code.co_freevars))]
    src = (f"def _outer():\n    {' = '.join(free + ['None']) if free else 'pass'}\n"
           f"    def {fn.__name__}({', '.join(params)}):\n"
           f"        if __npusim_trap__ is None:\n            ({', '.join(free)}{',' if free else ''})\n"
           f"        return __npusim_trap__({key}, {args}, {kwargs})\n"
           f"    return {fn.__name__}.__code__\n")
    ns: dict = {}
    exec(compile(src, TRAP_FILE, "exec"), ns)
    return ns["_outer"]()


def arm(functions: list[tuple[types.FunctionType, str]], on_call: Callable[[str, Any], None]
        ) -> list[tuple[types.FunctionType, types.CodeType]]:
    """Give every ``(function, dotted name)`` its trap: ``on_call(dotted, caller_frame)`` runs before each
    call. Returns what :func:`disarm` puts back."""
    armed = []
    for fn, dotted in functions:
        code = fn.__code__
        if code.co_filename == TRAP_FILE:
            continue   # armed by an enclosing check
        key = id(fn)
        if key not in _TRAPS or _TRAPS[key][0].__code__ is not code:
            orig = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
            orig.__kwdefaults__ = fn.__kwdefaults__
            orig.__qualname__ = fn.__qualname__
            _TRAPS[key] = (orig, dotted, on_call)
            _trap_code[key] = _make_trap(key, fn)
        else:
            _TRAPS[key] = (_TRAPS[key][0], dotted, on_call)
        fn.__globals__["__npusim_trap__"] = _dispatch
        fn.__code__ = _trap_code[key]
        armed.append((fn, code))
    return armed


def disarm(armed: list[tuple[types.FunctionType, types.CodeType]]) -> None:
    """Put the original code back."""
    for fn, code in armed:
        fn.__code__ = code
