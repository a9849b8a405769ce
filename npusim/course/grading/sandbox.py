"""Where and as whom one submission's kernel runs, and making sure nothing of it outlives its grading.

Only the notebook's Jupyter kernel is the submission's. nbval, pytest, the grader's plugin, the results
(``junit.xml``, ``cells.jsonl``) and the audit record stay with the grader, in a folder of the grader's
that the kernel cannot see; the kernel talks to them only through the kernel protocol (ZeroMQ over Unix
sockets in the kernel's home). The kernel runs

- in namespaces of its own (``unshare``: network with loopback only, PID, mount, IPC, host name);
- on a new root file system holding only the system folders, the Python installation, its read-only copy
  of ``npusim`` (no ``solutions/``) and its home (:mod:`.jail`): the course, its ``.git``, other
  checkouts, other submissions and every output folder are not there to be read;
- as a user id of its own when the grader is root (``user``: taken from a lease in ``/run/npusim-grade``
  that every grader on the machine shares), else as the grader's user mapped to root of a user namespace
  with every capability dropped (``copy``);
- under resource limits (address space, file size, core dumps; processes for ``user``).

When the kernel (the PID namespace's first process) ends, the kernel of the operating system ends every
process the submission started; the grader ends the kernel by ending its process tree.
"""

from __future__ import annotations

import fcntl
import grp
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import json
from dataclasses import dataclass
from pathlib import Path

from .snapshot import Snapshot, remove_tree

UID_RANGE = range(61184, 65520)         # systemd's range for dynamic users: no account claims these
LEASES = Path("/run/npusim-grade")      # one place for every grader of this machine, whatever its TMPDIR
JAIL = Path(__file__).resolve().with_name("jail.py")   # the grader's own (run before the kernel, as root)
# the interpreter of the grading processes; -P (3.11+): the current folder is not put on sys.path
PYTHON = [sys.executable, "-P"] if sys.version_info >= (3, 11) else [sys.executable]
_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "OPENBLAS_NUM_THREADS")


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
    pid_namespace: bool = True          # namespaces (always: grading refuses to run without them)

    @property
    def name(self) -> str:
        return "user" if self.user else "copy"

    def describe(self) -> str:
        who = ("as a user id of its own" if self.user else
               "as the grader's user mapped to root of a user namespace, without capabilities")
        return (f"each submission's kernel {who}, in its own PID namespace and network namespace (loopback "
                f"only), on a new root holding only the system, Python and a read-only copy of npusim")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def python_paths() -> list[str]:
    """The folders the kernel's Python needs (installation, virtualenv, every site-packages on sys.path),
    without any folder holding an ``npusim`` package (a checkout)."""
    found = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, os.path.dirname(sys.executable))}
    found |= {os.path.realpath(p) for p in sys.path
              if p and os.path.isdir(p) and (os.path.basename(p) in ("site-packages", "dist-packages")
                                             or _inside(os.path.realpath(p), os.path.realpath(sys.base_prefix)))}
    found = {p for p in found if os.path.isdir(p) and not os.path.isfile(os.path.join(p, "npusim", "__init__.py"))}
    return sorted(p for p in found if not any(q != p and _inside(p, q) for q in found))


def _unshare_prefix(root: bool) -> list[str]:
    user_ns = [] if root else ["--user", "--map-root-user"]
    return ["unshare", *user_ns, "--net", "--pid", "--mount", "--ipc", "--uts", "--fork", "--kill-child"]


_PROBED: dict[bool, str] = {}


def namespaces_problem(user: bool) -> str:
    """Why ``unshare`` cannot give a kernel its namespaces here ("" when it can; tried once per process)."""
    if user not in _PROBED:
        if shutil.which("unshare") is None:
            _PROBED[user] = "the unshare program (util-linux) is missing"
        else:
            try:
                r = subprocess.run([*_unshare_prefix(user), "true"], stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=20)
                _PROBED[user] = "" if r.returncode == 0 else f"unshare failed: {r.stderr.strip()[:200]}"
            except (OSError, subprocess.SubprocessError) as e:
                _PROBED[user] = f"unshare failed: {e}"
    return _PROBED[user]


def choose_isolation(requested: str = "auto") -> Isolation:
    """``auto``: ``user`` when running as root, else ``copy``. Raises ValueError when this machine cannot
    isolate submissions (no Linux namespaces): grading must not run unisolated."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if requested not in ("auto", "user", "copy"):
        raise ValueError(f"--isolation must be auto, user or copy, not {requested!r}")
    if requested == "user" and not root:
        raise ValueError("--isolation user needs root (it runs each submission as a user id of its own); "
                         "use --isolation copy, or run npusim grade as root inside a container")
    user = root and requested != "copy"
    problem = namespaces_problem(user) if sys.platform.startswith("linux") else "this is not Linux"
    if problem:
        raise ValueError(f"cannot isolate submissions here ({problem}); npusim grade needs Linux namespaces "
                         f"(unshare; as root, or with unprivileged user namespaces enabled)")
    return Isolation(user, True)


# --- user ids -------------------------------------------------------------------------------------------

def _has_account(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def lease_folder(folder: Path = LEASES) -> Path:
    """The lease folder: a real folder owned by root, mode 700 (refused when anything else sits there)."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o077:
        raise RuntimeError(f"{folder} must be a folder owned by root with mode 700 (found mode "
                           f"{stat.filemode(st.st_mode)}, owner {st.st_uid}); remove it")
    return folder


class UidLease:
    """A user id held for one submission: locked against every other grader of this machine (a file lock
    in :data:`LEASES`, released by the kernel if this process dies), free of accounts and processes."""

    _lock = threading.Lock()
    _held: set[int] = set()

    def __init__(self, folder: Path = LEASES) -> None:
        from .processes import uids_running

        folder = lease_folder(folder)
        running = uids_running()
        with UidLease._lock:
            for uid in UID_RANGE:
                if uid in UidLease._held or uid in running or _has_account(uid):
                    continue
                fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
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


# --- the audit record: sent by the kernel, kept by the grader ---------------------------------------------

class AuditReceiver:
    """A Unix datagram socket the kernel's audit hook sends its records to; what arrived is the grader's
    (a kernel can stop sending, never take back what it sent)."""

    def __init__(self, path: Path) -> None:
        self.path, self.records = path, []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(path))
        os.chmod(path, 0o666)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="npusim-grade-audit")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                rec = json.loads(data.decode("utf-8", "replace"))
                self.records.append(f"{rec['action']} {rec['target']}")
            except (ValueError, KeyError, TypeError):
                continue

    def close(self) -> list[str]:
        """Stop listening; what the kernel reported, each once."""
        self._stop.set()
        self._thread.join(5)
        self._sock.close()
        return list(dict.fromkeys(self.records))


# --- one submission's sandbox ---------------------------------------------------------------------------

class Sandbox:
    """The folders, user, kernel command line and environment of one submission, and its clean-up.

    ``base/`` (the grader's, mode 700) holds ``grader/`` (the restored notebook, pytest's files, the
    results), ``root/`` (where the kernel's new root is built), ``lib/`` (the read-only copy of the package,
    first on the kernel's ``PYTHONPATH``), ``audit/`` (the audit socket) and ``home/`` (the kernel's: its
    working folder, connection file and sockets, ``TMPDIR``, IPython's and matplotlib's folders)."""

    def __init__(self, isolation: Isolation, snapshot: Snapshot, *, seed: int, limits: Limits,
                 protect: dict[str, str] | None = None, watch: list[str] = ()) -> None:
        self.isolation, self.snapshot, self.limits = isolation, snapshot, limits
        self.lease = UidLease() if isolation.user else None
        self.base = Path(tempfile.mkdtemp(prefix="npusim-grade-"))
        try:
            for sub in ("grader", "root", "audit"):
                (self.base / sub).mkdir(mode=0o700 if sub == "grader" else 0o755)
            self.grader = self.base / "grader"
            self.lib = snapshot.write(self.base / "lib")
            self.home = self.base / "home"
            for sub in ("work", "kernel", "tmp", "ipython", ".config/matplotlib", ".jupyter"):
                (self.home / sub).mkdir(parents=True, exist_ok=True)
            if self.uid is not None:
                for dirpath, dirnames, filenames in os.walk(self.home, followlinks=False):
                    for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                        os.chown(name, self.uid, self.uid, follow_symlinks=False)
            self.home.chmod(0o700)
            self.audit = AuditReceiver(self.base / "audit" / "audit.sock")
        except BaseException:
            self.close()
            raise
        self.env = self._env(seed, {**(protect or {}), str(self.lib): ""}, [*watch, str(self.lib)])

    @property
    def uid(self) -> int | None:
        return self.lease.uid if self.lease else None

    @property
    def connection_file(self) -> Path:
        return self.home / "kernel" / "kernel.json"

    def _env(self, seed: int, protect: dict[str, str], watch: list[str]) -> dict[str, str]:
        """The kernel's whole environment: nothing of the grader's own (tokens, credentials) leaks in."""
        env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
        home = self.home
        env.update(
            HOME=str(home), TMPDIR=str(home / "tmp"), JUPYTER_RUNTIME_DIR=str(home / "kernel"),
            JUPYTER_CONFIG_DIR=str(home / ".jupyter"), JUPYTER_DATA_DIR=str(home / ".jupyter" / "data"),
            JUPYTER_PLATFORM_DIRS="1", IPYTHONDIR=str(home / "ipython"),
            MPLCONFIGDIR=str(home / ".config" / "matplotlib"), MPLBACKEND="Agg",
            PYTHONPATH=str(self.lib), PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1",
            NPUSIM_STRICT="1", NPUSIM_CHECK_SEED=str(seed),
            NPUSIM_GRADE_AUDIT=json.dumps({"socket": str(self.audit.path), "protect": protect, "watch": watch}))
        return env

    def kernel_argv(self) -> list[str]:
        """The kernel's command line (``{connection_file}`` for jupyter_client to fill in): namespaces, the
        jail (new root, limits, user, environment), then ``ipykernel``."""
        jail = [*PYTHON, str(JAIL), f"--root-dir={self.base / 'root'}", "--loopback",
                *[f"--ro={p}" for p in [*python_paths(), str(self.lib), str(self.audit.path)]],
                f"--rw={self.home}", "--give={connection_file}", f"--chdir={self.home / 'work'}",
                *self.limits.args(self.isolation.user), *[f"--env={k}={v}" for k, v in self.env.items()]]
        if self.uid is not None:
            jail.append(f"--uid={self.uid}")
        kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        # without a user id of its own (copy), always a user namespace: its capabilities (dropped anyway
        # before the kernel starts) count for nothing outside it
        return [*_unshare_prefix(self.uid is not None), *jail, "--", *kernel]

    def kernel_spec(self) -> Path:
        """The file the grader's plugin reads to start the kernel in this sandbox."""
        path = self.grader / "sandbox.json"
        path.write_text(json.dumps({"argv": self.kernel_argv(), "connection_file": str(self.connection_file),
                                    "ip": str(self.home / "kernel" / "k"), "cwd": str(self.grader)}),
                        encoding="utf-8")
        return path

    def pytest_env(self) -> dict[str, str]:
        """The grader's pytest: the grader's environment, without pytest options or plugins of its own."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "JUPYTER_", "NPUSIM_"))}
        g = self.grader
        env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", JUPYTER_RUNTIME_DIR=str(g), JUPYTER_CONFIG_DIR=str(g),
                   JUPYTER_DATA_DIR=str(g), JUPYTER_PLATFORM_DIRS="1", PYTHONDONTWRITEBYTECODE="1")
        return env

    def attempts(self) -> list[str]:
        """What the audit hook reported the kernel tried against the course (``write npusim/...``)."""
        return self.audit.close()

    def end_processes(self) -> None:
        """End the kernel's PID namespace (every process the submission started, in any session or group)."""
        from .processes import end_namespace

        try:
            record = json.loads((self.grader / "namespace.json").read_text(encoding="utf-8"))
            ns = record["ns"]
        except (OSError, ValueError, KeyError, TypeError):
            return          # the kernel never started
        if ns != os.readlink("/proc/self/ns/pid"):
            end_namespace(ns, record.get("init"), record.get("started"))

    def close(self) -> None:
        """End the kernel's namespace, stop the audit socket, delete ``base/`` (never following a link) and
        give the user id back."""
        if hasattr(self, "grader"):
            self.end_processes()
        if hasattr(self, "audit"):
            self.audit.close()
        remove_tree(self.base)
        if self.lease:
            self.lease.release()
            self.lease = None
