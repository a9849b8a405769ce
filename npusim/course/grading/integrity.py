"""Noticing in-process forging, inside the kernel (standard library only; loaded at the kernel's start-up
by ``kernel_startup.py``, before any of the learner's code).

What the checks' results rest on is recorded when it comes into being: the hidden seed (from the
environment at start-up) and, as each module of ``npusim.checks`` finishes importing (an import hook),
every function, class and module it holds, with each function's code object (and the code of the
function a ``learner_facing`` wrapper wraps). After each cell the grader asks for :func:`verdict`: an
empty string while all of that is as recorded, else what changed (``npusim.checks.vector_add was
replaced``, ``NPUSIM_CHECK_SEED was changed``). The grader withholds every mark from that cell on.

This is detection, not prevention: code in the kernel can also change what this module records or
answers. It stops the forgeries a learner finds by trying (replacing a check, patching the module,
resetting the seed), not a determined one; see the README's Instructors section.
"""

import builtins
import importlib.abc
import os
import sys
import types

SEED_ENV = "NPUSIM_CHECK_SEED"
WATCHED = "npusim.checks"
_STATE = {"seed": None, "environ": None, "modules": {}, "first": ""}
_KINDS = (types.FunctionType, type, types.ModuleType, types.BuiltinFunctionType)


def _code(obj):
    code = getattr(obj, "__code__", None)
    inner = getattr(getattr(obj, "__wrapped__", None), "__code__", None)
    return code, inner


def _record(module) -> None:
    entries = {}
    for name, obj in list(vars(module).items()):
        if not name.startswith("__") and isinstance(obj, _KINDS):
            entries[name] = (obj, *_code(obj))
    _STATE["modules"][module.__name__] = (module, entries)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _record(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != WATCHED and not name.startswith(WATCHED + "."):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    """Record the seed now and the checks' modules as they are imported."""
    _STATE["seed"], _STATE["environ"] = os.environ.get(SEED_ENV), os.environ
    sys.meta_path.insert(0, _Finder())


def _problems() -> list:
    found = []
    if os.environ is not _STATE["environ"] or os.environ.get(SEED_ENV) != _STATE["seed"]:
        found.append(f"{SEED_ENV} was changed")
    for name, (module, entries) in _STATE["modules"].items():
        if sys.modules.get(name) is not module:
            found.append(f"the module {name} was replaced or removed")
            continue
        now = vars(module)
        for attr, (obj, code, inner) in entries.items():
            if now.get(attr) is not obj:
                found.append(f"{name}.{attr} was replaced")
            elif _code(obj) != (code, inner):
                found.append(f"the code of {name}.{attr} was replaced")
    shell = getattr(builtins, "get_ipython", lambda: None)()
    checks = _STATE["modules"].get(WATCHED, (None,))[0]
    ns = getattr(shell, "user_ns", {}) if shell is not None else {}
    if checks is not None and "check" in ns and ns["check"] is not checks:
        found.append("the name `check` no longer names npusim.checks")
    return found


def verdict() -> str:
    """"" while the checks and the seed are as recorded; else what changed (remembered: once forged,
    always forged)."""
    if not _STATE["first"]:
        _STATE["first"] = "; ".join(_problems()[:6])
    return _STATE["first"]
