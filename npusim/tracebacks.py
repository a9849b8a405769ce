"""Errors a learner can read in a notebook.

In IPython, an exception that comes out of the simulator (or passes through it) is shown as its message
plus the learner's own frames only, each named the way JupyterLab names cells (``In [7], line 12``); an
unfinished exercise (the ``raise NotImplementedError`` of a stub) is one line. Errors of plain Python
code that never entered the package keep IPython's usual traceback. ``npusim.show_internals(True)`` brings
the full traceback back for the curious.
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import traceback
from types import TracebackType

from .wrap import wrap

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_LIB_DIRS = tuple({os.path.abspath(p) for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                                                 sysconfig.get_paths()["platlib"], sys.prefix,
                                                 sys.base_prefix) if p and len(os.path.abspath(p)) > 1})
_SITE_PARTS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
_state = {"internals": False}
RED, RESET = "\x1b[31m", "\x1b[0m"


def show_internals(on: bool = True) -> None:
    """Show full tracebacks, the simulator's own frames included (off by default: learners see their
    own frames only)."""
    _state["internals"] = bool(on)


def internals_shown() -> bool:
    return _state["internals"]


def _ipython():
    """The running IPython shell, without importing IPython where nobody has (plain Python scripts)."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    return get() if get is not None else None


def cell_label(filename: str) -> str | None:
    """``In [7]`` for a file IPython compiled from a notebook cell, else None."""
    ip = _ipython()
    if ip is None:
        return None
    try:
        named = ip.compile.format_code_name(filename)
    except Exception:  # noqa: BLE001 - an older or foreign shell: no cell names
        return None
    if not named or not str(named[1]).startswith("In["):
        return None
    return "In [" + str(named[1])[3:]


def site(filename: str, lineno: int) -> str:
    """Where a line is, as the learner sees it: ``In [7], line 12`` in a notebook, else ``file.py:12``."""
    label = cell_label(filename)
    if label:
        return f"{label}, line {lineno}"
    return f"{os.path.basename(filename)}:{lineno}"


def is_package_file(filename: str) -> bool:
    """True for the simulator's own files and for installed libraries (torch, numpy, IPython, stdlib)."""
    path = os.path.abspath(filename)
    if path.startswith(_PKG_DIR + os.sep):
        return True
    if filename.startswith("<") and not cell_label(filename):
        return True  # <frozen ...>, <string>: not code the learner can open
    # an installed library, also one another environment provides (a .pth file, a shared venv)
    library = any(path.startswith(d + os.sep) for d in _LIB_DIRS) or any(p in path for p in _SITE_PARTS)
    return library and not cell_label(filename)


def learner_frames(tb: TracebackType | None) -> list[traceback.FrameSummary]:
    """The frames of ``tb`` that are the learner's own code, outermost first."""
    return [f for f in traceback.extract_tb(tb) if not is_package_file(f.filename)]


def innermost_learner_site(tb: TracebackType | None) -> str:
    """``In [7], line 12 (the line)`` of the innermost learner frame, or ''."""
    every = traceback.extract_tb(tb)
    mine = [i for i, f in enumerate(every) if not is_package_file(f.filename)]
    if not mine:
        return ""
    f = every[mine[-1]]
    line = (f.line or linecache.getline(f.filename, f.lineno)).strip()
    # raised inside a package helper the learner called (copy_strips, a band helper): name the helper
    via = f", in {every[mine[-1] + 1].name}" if mine[-1] + 1 < len(every) else ""
    return f"{site(f.filename, f.lineno)}{via}" + (f": {line}" if line else "")


def is_unfinished(exc: BaseException) -> bool:
    """An unfinished exercise: a NotImplementedError raised by the learner's own code (a stub)."""
    if not isinstance(exc, NotImplementedError):
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and not is_package_file(frames[-1].filename)


def unfinished_line(exc: BaseException) -> str:
    """One line for an unfinished exercise."""
    where = innermost_learner_site(exc.__traceback__).split(":")[0]
    what = str(exc).strip() or "this part"
    return wrap(f"not finished yet: {what}" + (f" ({where})" if where else ""))


def passes_through_package(tb: TracebackType | None) -> bool:
    return any(os.path.abspath(f.filename).startswith(_PKG_DIR + os.sep) for f in traceback.extract_tb(tb))


def compact(exc: BaseException) -> list[str]:
    """The exception as a learner should see it: type and message, then the learner's frames (innermost
    last) with their lines; never the simulator's frames. Lines are wrapped at ``npusim.wrap.WIDTH``
    characters on word boundaries."""
    head = f"{RED}{type(exc).__name__}{RESET}: {exc}"
    lines = [head]
    frames = learner_frames(exc.__traceback__)
    for f in frames[-4:]:  # the innermost few: deeper calls of the learner's own helpers still show
        code = (f.line or linecache.getline(f.filename, f.lineno)).strip()
        lines.append(f"  in {site(f.filename, f.lineno)}" + (f": {code}" if code else ""))
    if passes_through_package(exc.__traceback__):
        lines.append("  (npusim.show_internals(True) shows the simulator's own frames too)")
    return wrap("\n".join(lines)).split("\n")


def render(exc: BaseException) -> list[str] | None:
    """How to show ``exc`` in a notebook, or None for IPython's usual traceback."""
    if internals_shown():
        return None
    if is_unfinished(exc):
        return [unfinished_line(exc)]
    render_own = getattr(exc, "_render_traceback_", None)
    if render_own is not None:
        return None  # the exception renders itself (CheckFailed)
    from .errors import NpuSimError

    if isinstance(exc, NpuSimError) or passes_through_package(exc.__traceback__):
        return compact(exc)
    return None


def _handler(shell, etype, value, tb, tb_offset=None):
    """IPython custom exception handler: shows ``render(value)`` or IPython's own traceback."""
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # %debug and %tb still work
    stb = render(value)
    if stb is None:
        own = getattr(value, "_render_traceback_", None)
        stb = own() if own is not None and not internals_shown() else \
            shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    shell._showtraceback(etype, value, stb)
    return None


def install() -> bool:
    """Use :func:`render` for exceptions in the running IPython shell; False outside IPython."""
    ip = _ipython()
    if ip is None or not hasattr(ip, "set_custom_exc"):
        return False
    if getattr(ip, "custom_exceptions", ()) not in ((), (Exception,)):
        return False  # someone else's handler: leave it alone
    ip.set_custom_exc((Exception,), _handler)
    return True
