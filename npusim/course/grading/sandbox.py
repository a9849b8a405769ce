"""Where and as whom one submission runs, and making sure nothing of it outlives its grading.

Two isolations, chosen per machine (:func:`choose_isolation`):

- ``user`` (the grader runs as root): the submission runs as a user id of its own, one no account uses,
  taken for this submission only (like systemd's ``DynamicUser``), with no supplementary groups and
  ``no_new_privs``. Its copy of the package is owned by root and read-only to it; the course's
  ``solutions/`` and the output folders are hidden under empty mounts. Afterwards every process of that
  user is killed and its files in the shared temporary folders are removed.
- ``copy`` (any other user): the submission runs as the grader's user on a fresh read-only copy of the
  package; what it changes anyway (in its copy or in the course folder) is found by hashing afterwards.

Both run the submission in a PID namespace of its own where ``unshare`` allows it (as root, or through a
user namespace otherwise): when its first process ends, the kernel ends every process it started, in any
session or process group. Without one, the grader kills the process tree and every process carrying the
submission's token in its environment. Both set resource limits (address space, file size, core dumps,
and, for ``user``, the number of processes).
"""

from __future__ import annotations

import fcntl
import json
import os
import grp
import pwd
import secrets
import shutil
import site
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from .jail import blocking_ancestor
from .processes import kill, processes_of_user, processes_with_token, uids_running
from .snapshot import Snapshot, remove_tree

UID_RANGE = range(61184, 65520)         # systemd's range for dynamic users: no account claims these
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")
# the interpreter of the grading processes; -P (3.11+): the current folder is not put on sys.path
PYTHON = [sys.executable, "-P"] if sys.version_info >= (3, 11) else [sys.executable]
_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "OPENBLAS_NUM_THREADS", "SYSTEMROOT")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one submission's processes (0: none)."""

    memory: int = 6 << 30               # bytes of address space per process (RLIMIT_AS)
    file_size: int = 1 << 30            # bytes per file written (RLIMIT_FSIZE)
    processes: int = 256                # processes of the submission's user (RLIMIT_NPROC; ``user`` only)

    def args(self, user: bool) -> list[str]:
        pairs = [("as", self.memory), ("fsize", self.file_size), ("core", 0)]
        if user:
            pairs.append(("nproc", self.processes))
        return [f"--limit={name}={value}" for name, value in pairs if value or name == "core"]


@dataclass(frozen=True)
class Isolation:
    """How submissions are kept from each other and from the course on this machine."""

    user: bool                          # a user id of its own per submission (needs root)
    pid_namespace: bool                 # a PID namespace per submission (``unshare``)

    @property
    def name(self) -> str:
        return "user" if self.user else "copy"

    def describe(self) -> str:
        if self.user:
            text = ("each submission as a user id of its own on a root-owned read-only copy of the package, "
                    "solutions and outputs hidden")
        else:
            text = "each submission on a fresh read-only copy of the package, checked by hashes afterwards"
        return text + ("; its own PID namespace" if self.pid_namespace else
                       "; processes tracked by tree and environment token (no PID namespace here)")


def python_paths() -> list[str]:
    """The folders this Python needs (installation, virtualenv, site-packages)."""
    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable)),
             *site.getsitepackages()}
    return sorted(p for p in paths if os.path.isdir(p))


def python_blocked() -> bool:
    """Whether another user could not reach this Python or the temporary folder (one lies under a folder
    such as ``/root``)."""
    return any(blocking_ancestor(p) for p in [*python_paths(), os.path.join(tempfile.gettempdir(), "x")])


_PROBED: dict[bool, bool] = {}


def _unshare_prefix(root: bool) -> list[str]:
    user_ns = [] if root else ["--user", "--map-root-user"]
    return ["unshare", *user_ns, "--pid", "--fork", "--kill-child", "--mount-proc"]


def pid_namespace_works(root: bool) -> bool:
    """Whether ``unshare`` can give a submission its own PID namespace here (tried once per process)."""
    if root not in _PROBED:
        try:
            ok = shutil.which("unshare") is not None and subprocess.run(
                [*_unshare_prefix(root), "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, timeout=20).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        _PROBED[root] = ok
    return _PROBED[root]


def choose_isolation(requested: str = "auto") -> Isolation:
    """``auto``: ``user`` when running as root, else ``copy``; ``user`` without root is an error."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if requested not in ("auto", "user", "copy"):
        raise ValueError(f"--isolation must be auto, user or copy, not {requested!r}")
    if requested == "user" and not root:
        raise ValueError("--isolation user needs root (it runs each submission as a user id of its own); "
                         "use --isolation copy, or run npusim grade as root inside a container")
    pid_ns = sys.platform.startswith("linux") and pid_namespace_works(root)
    user = root and requested != "copy"
    if user and not pid_ns and python_blocked():
        if requested == "user":
            raise ValueError(f"--isolation user: another user cannot reach this Python ({sys.base_prefix}) and "
                             f"unshare cannot make it reachable here; install Python where others can read it")
        user = False            # auto: the user could not even start Python; fall back to copies
    return Isolation(user, pid_ns)


# --- user ids -------------------------------------------------------------------------------------------

def _has_account(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


class UidLease:
    """A user id held for one submission: locked against other graders on this machine (a file lock that
    the kernel releases if this process dies), free of accounts and of running processes."""

    _lock = threading.Lock()
    _held: set[int] = set()

    def __init__(self) -> None:
        folder = Path(tempfile.gettempdir()) / "npusim-grade-uids"
        folder.mkdir(mode=0o700, exist_ok=True)
        running = uids_running()
        with UidLease._lock:
            for uid in UID_RANGE:
                if uid in UidLease._held or uid in running or _has_account(uid):
                    continue
                fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
                self.uid, self._fd = uid, fd
                UidLease._held.add(uid)
                return
        raise RuntimeError(f"no free user id in {UID_RANGE.start}-{UID_RANGE.stop - 1} for a submission")

    def release(self) -> None:
        with UidLease._lock:
            UidLease._held.discard(self.uid)
        os.close(self._fd)


# --- one submission's sandbox ---------------------------------------------------------------------------

class Sandbox:
    """The folders, user, command line and environment of one submission, and its clean-up.

    ``base/`` (the grader's) holds ``lib/`` (the read-only copy of the package, first on ``PYTHONPATH``)
    and ``home/`` (the submission's: the notebook in ``home/nb``, results in ``home/out``, ``TMPDIR``,
    Jupyter's runtime folder with the kernel's connection file, IPython's and matplotlib's folders). The
    whole of ``base/`` is removed by :meth:`close`."""

    def __init__(self, isolation: Isolation, snapshot: Snapshot, *, seed: int, limits: Limits,
                 hide: list[Path] = (), protect: dict[str, str] | None = None, watch: list[str] = ()) -> None:
        self.isolation, self.snapshot, self.limits = isolation, snapshot, limits
        self.hide = [str(Path(p).resolve()) for p in hide]
        self.token = secrets.token_hex(8)
        self.lease = UidLease() if isolation.user else None
        self.base = Path(tempfile.mkdtemp(prefix="npusim-grade-"))
        self.lib = snapshot.write(self.base / "lib")
        self.home = self.base / "home"
        for sub in ("nb", "out", "tmp/runtime", "ipython", ".config/matplotlib", ".jupyter"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        self.audit_log = self.home / "out" / "audit.jsonl"
        protect = {**(protect or {}), str(self.lib): ""}
        self.env = self._env(seed, protect, [*watch, str(self.lib)])

    @property
    def uid(self) -> int | None:
        return self.lease.uid if self.lease else None

    def hand_over(self) -> None:
        """Give ``home/`` to the submission's user (call once its files are written)."""
        if self.uid is None:
            return
        self.base.chmod(0o711)          # the user may pass through base/ to lib/ and home/, not list it
        for dirpath, dirnames, filenames in os.walk(self.home):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.chown(name, self.uid, self.uid)
        self.home.chmod(0o700)

    def _env(self, seed: int, protect: dict[str, str], watch: list[str]) -> dict[str, str]:
        """A small environment: nothing of the grader's own (tokens, credentials, pytest options) leaks in."""
        env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
        home = self.home
        env.update(
            HOME=str(home), TMPDIR=str(home / "tmp"), JUPYTER_RUNTIME_DIR=str(home / "tmp" / "runtime"),
            JUPYTER_CONFIG_DIR=str(home / ".jupyter"), JUPYTER_DATA_DIR=str(home / ".jupyter" / "data"),
            JUPYTER_PLATFORM_DIRS="1", IPYTHONDIR=str(home / "ipython"),
            MPLCONFIGDIR=str(home / ".config" / "matplotlib"), MPLBACKEND="Agg",
            PYTHONPATH=str(self.lib), PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1",
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",   # only nbval and the grader's plugin: a hermetic pytest
            NPUSIM_STRICT="1", NPUSIM_CHECK_SEED=str(seed), NPUSIM_GRADE_TOKEN=self.token,
            NPUSIM_GRADE_AUDIT=json.dumps({"log": str(self.audit_log), "protect": protect, "watch": watch}))
        return env

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` wrapped: PID namespace (where available), then the jail (hiding, limits, user)."""
        jail = [*PYTHON, str(self.lib / "npusim" / "course" / "grading" / "jail.py"),
                *self.limits.args(self.isolation.user)]
        if self.uid is not None:
            if self.isolation.pid_namespace:    # a private mount namespace to expose and hide folders in
                jail += [f"--expose={p}" for p in [*python_paths(), str(self.base)]]
                needed = [*python_paths(), str(self.base)]   # never hide what the submission must run
                jail += [f"--hide={p}" for p in self.hide
                         if not any(n == p or n.startswith(p + os.sep) for n in needed)]
            jail.append(f"--uid={self.uid}")
        prefix = _unshare_prefix(self.uid is not None or os.geteuid() == 0) if self.isolation.pid_namespace else []
        return [*prefix, *jail, "--", *argv]

    def end_processes(self) -> None:
        """Kill whatever of the submission is still running (a daemon it detached included)."""
        for _ in range(3):
            pids = processes_of_user(self.uid) if self.uid is not None else processes_with_token(self.token)
            if not pids:
                return
            kill(pids)

    def attempts(self) -> list[str]:
        """What the audit hook saw the submission try against the course (``write npusim/...``)."""
        try:
            lines = self.audit_log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []
        found = []
        for line in lines:
            try:
                rec = json.loads(line)
                found.append(f"{rec['action']} {rec['target']}")
            except (ValueError, KeyError, TypeError):
                continue
        return list(dict.fromkeys(found))

    def close(self) -> None:
        """End every process, remove the user's files from the shared temporary folders, delete ``base/``
        and give the user id back."""
        self.end_processes()
        if self.uid is not None:
            for folder in SHARED_TEMP:
                try:
                    entries = list(os.scandir(folder))
                except OSError:
                    continue
                for entry in entries:
                    try:
                        if entry.stat(follow_symlinks=False).st_uid == self.uid:
                            if entry.is_dir(follow_symlinks=False):
                                remove_tree(Path(entry.path))
                            else:
                                os.unlink(entry.path)
                    except OSError:
                        continue
        remove_tree(self.base)
        if self.lease:
            self.lease.release()
