"""A record of attempts to change the course, kept inside a submission's Python processes.

The grader writes this file beside the submission's copy of ``npusim``; its ``sitecustomize`` (see
``kernel_startup.py``) loads it at start-up in the kernel and any Python the learner's code starts, before
any of the learner's code. With ``NPUSIM_GRADE_AUDIT`` set (JSON: ``{"socket": PATH, "protect": {FOLDER:
LABEL}, "watch": [FOLDER...]}``) it adds an audit hook (PEP 578) that sends one JSON datagram to the
grader's Unix socket PATH (the record is the grader's, out of the submission's reach) for every write,
delete, rename or permission change aimed at a protected folder, and for every command that names a
watched folder (the checks' package, the solutions), whether or not the operating system then refuses it. An audit hook cannot be removed, but code that calls the C library
directly goes unseen: this reports casual attempts; the hashes the grader checks report what changed.
Standard library only (it runs before ``npusim`` could be imported).
"""

import json
import os
import socket
import sys

_WRITE = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
# event -> (what it does, positions of the path arguments)
_PATHS = {
    "os.remove": ("delete", (0,)), "os.rmdir": ("delete", (0,)), "shutil.rmtree": ("delete", (0,)),
    "os.rename": ("rename", (0, 1)), "os.replace": ("rename", (0, 1)), "shutil.move": ("rename", (0, 1)),
    "os.mkdir": ("create", (0,)), "os.symlink": ("create", (1,)), "os.link": ("create", (1,)),
    "shutil.copyfile": ("write", (1,)), "shutil.copytree": ("write", (1,)), "os.truncate": ("write", (0,)),
    "os.chmod": ("chmod", (0,)), "os.chown": ("chown", (0,)), "shutil.chown": ("chown", (0,)),
    "os.utime": ("touch", (0,)), "os.setxattr": ("chattr", (0,)), "os.removexattr": ("chattr", (0,)),
}
_COMMANDS = {"os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn"}
_WATCHED = frozenset(["open", *_PATHS, *_COMMANDS])


def _label(path, protect: dict) -> str | None:
    """``LABEL/relative/path`` when ``path`` lies in a protected folder, else None."""
    if isinstance(path, int) or path is None:
        return None
    try:
        path = os.fsdecode(os.fspath(path))
        full = os.path.realpath(os.path.join(os.getcwd(), path))
    except (TypeError, ValueError, OSError):
        return None
    for folder, label in protect.items():
        if full == folder or full.startswith(folder + os.sep):
            rel = os.path.relpath(full, folder)
            return f"{label}{'' if rel == '.' else rel}"
    return None


def install(sock: str, protect: dict, watch: list = ()) -> None:
    """Add the hook: attempts on ``protect`` (``{folder: label}``) and commands naming a folder of
    ``watch`` go to the Unix datagram socket ``sock`` as JSON."""
    protect = {os.path.realpath(k): v for k, v in protect.items()}
    watch = [os.path.realpath(w) for w in watch]
    busy = []

    def record(action: str, target: str) -> None:
        busy.append(1)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.sendto(json.dumps({"action": action, "target": target, "pid": os.getpid()}).encode(), sock)
        except OSError:
            pass
        finally:
            busy.pop()

    def hook(event, args):
        if event not in _WATCHED or busy:
            return
        if event == "open":
            mode, flags = (args[1] or ""), (args[2] if len(args) > 2 and isinstance(args[2], int) else 0)
            if not (any(m in str(mode) for m in "wax+") or flags & _WRITE):
                return
            action, paths = "write", (args[0],)
        elif event in _COMMANDS:
            text = " ".join(str(a) for a in args[:3])
            hit = next((folder for folder in watch if folder in text), None)
            if hit is not None:
                record("run a command on", f"{_label(hit, protect) or hit}: {text[:200]}")
            return
        else:
            action, where = _PATHS[event]
            paths = tuple(args[i] for i in where if i < len(args))
        for p in paths:
            target = _label(p, protect)
            if target is not None:
                record(action, target)

    sys.addaudithook(hook)


def install_from_env() -> None:
    spec = os.environ.get("NPUSIM_GRADE_AUDIT")
    if spec:
        cfg = json.loads(spec)
        install(cfg["socket"], cfg["protect"], cfg.get("watch", []))
