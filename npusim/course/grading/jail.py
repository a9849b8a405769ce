"""The launcher of one submission's grading process: ``python -P jail.py [options] -- COMMAND...``.

Run by path from the submission's read-only copy of the package (standard library only, before any of the
learner's code): in the private mount namespace ``unshare --mount`` gives, it makes the Python installation
reachable for the unprivileged user when it lies in a folder others cannot enter (``/root``), and hides
folders the submission must not read under empty read-only mounts; then it sets resource limits, drops to an
unprivileged user (no supplementary groups, ``no_new_privs`` so set-uid programs cannot climb back), then
replaces itself by COMMAND. Inside ``unshare --pid --fork`` it is the namespace's first process, so when
COMMAND ends the kernel ends every process the submission started.
"""

import argparse
import ctypes
import os
import resource
import sys

_LIMITS = {"as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE, "nproc": resource.RLIMIT_NPROC,
           "core": resource.RLIMIT_CORE}
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC = 1, 2, 4, 8, 4096, 16384
_PR_SET_NO_NEW_PRIVS = 38


def _fail(message: str) -> None:
    print(f"npusim grade (jail): {message}", file=sys.stderr, flush=True)
    sys.exit(125)


def _mount(source, target: str, fstype, flags: int, data) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    enc = lambda x: None if x is None else os.fsencode(x)  # noqa: E731
    if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        _fail(f"cannot mount over {target}: {os.strerror(ctypes.get_errno())}")


def hide(folder: str) -> None:
    """Mount an empty, read-only tmpfs over ``folder`` (in this mount namespace only)."""
    _mount("npusim-hidden", folder, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "size=4k,mode=000")


def blocking_ancestor(path: str) -> str | None:
    """The first folder above ``path`` that other users may not pass through (e.g. ``/root``, mode 700)."""
    parts = os.path.abspath(path).split(os.sep)[1:-1]
    for k in range(len(parts)):
        folder = os.sep + os.sep.join(parts[:k + 1])
        if not os.stat(folder).st_mode & 0o001:
            return folder
    return None


def expose(paths: list[str]) -> None:
    """Make ``paths`` (e.g. a Python installed under ``/root``) reachable for an unprivileged user without
    changing any permission on disk: each folder that blocks the way is covered by a tmpfs holding only
    the way to those paths, each bind-mounted back from a handle opened before (the rest of that folder
    stays out of sight)."""
    groups: dict[str, list[str]] = {}
    for p in paths:
        ancestor = blocking_ancestor(p)
        if ancestor is not None:
            groups.setdefault(ancestor, []).append(os.path.abspath(p))
    for ancestor, wanted in groups.items():
        wanted = [p for p in dict.fromkeys(wanted) if not any(p.startswith(q + os.sep) for q in wanted)]
        handles = [(os.open(p, os.O_PATH | os.O_DIRECTORY), p) for p in wanted]
        _mount("npusim-expose", ancestor, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=64k")
        for fd, p in handles:
            os.makedirs(p, 0o755, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", p, None, _MS_BIND | _MS_REC, None)
            os.close(fd)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="jail.py")
    p.add_argument("--hide", action="append", default=[], help="a folder to cover with an empty tmpfs")
    p.add_argument("--expose", action="append", default=[], help="a folder the user must reach (see expose)")
    p.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                   help=f"a resource limit ({', '.join(_LIMITS)}), soft and hard")
    p.add_argument("--uid", type=int, help="run COMMAND as this user (and group of the same number)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        _fail("no command")
    if args.expose:
        expose(args.expose)
    for folder in args.hide:
        if os.path.isdir(folder):
            hide(folder)
    for item in args.limit:
        name, value = item.split("=", 1)
        resource.setrlimit(_LIMITS[name], (int(value), int(value)))
    if args.uid is not None:
        os.setgroups([])
        os.setgid(args.uid)
        os.setuid(args.uid)
        if os.getuid() != args.uid or os.geteuid() != args.uid:
            _fail(f"could not become user {args.uid}")
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail(f"prctl(no_new_privs): {os.strerror(ctypes.get_errno())}")
    try:
        os.execvp(command[0], command)
    except OSError as e:
        _fail(f"cannot run {command[0]}: {e.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
