"""The launcher of one submission's kernel: ``python -P jail.py [options] -- COMMAND...``.

Run by the grader, by path, inside ``unshare --net --pid --mount --ipc --uts --fork`` (standard library
only, before any of the learner's code). Still privileged in those namespaces, it

1. brings the new network namespace's loopback up (the namespace has nothing else: no route out);
2. builds a new root file system that holds only what the kernel needs, each folder bind-mounted read-only
   at its own path (the system's ``/usr``, ``/etc``..., the Python installation, the submission's copy of
   ``npusim``), its home read-write, and fresh ``/proc``, ``/dev``, ``/tmp``, ``/dev/shm``; everything else
   of the machine (the course, ``.git``, other checkouts, other submissions, the grader's results, the
   Dask certificates) does not exist in there;
3. hands the kernel's connection file to the submission's user, sets resource limits, drops to that user
   (no supplementary groups) or, without one, drops every capability, sets ``no_new_privs``, and replaces
   itself by COMMAND with exactly the environment given.

As the first process of the PID namespace, COMMAND's end ends every process the submission started.
"""

import argparse
import ctypes
import os
import platform
import resource
import socket
import struct
import sys

_LIMITS = {"as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE, "nproc": resource.RLIMIT_NPROC,
           "core": resource.RLIMIT_CORE}
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECUREBITS, _PR_CAPBSET_DROP = 1, 38, 28, 24
_SECBITS_LOCKED_NOROOT = 0x3 | 0xC | 0x30       # noroot, no_setuid_fixup, keep_caps off: all locked
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41, "ppc64le": 203, "s390x": 217, "riscv64": 41}
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_DEVICES = ("null", "zero", "full", "random", "urandom")
_LIBC = ctypes.CDLL(None, use_errno=True)


def _fail(message: str) -> None:
    print(f"npusim grade (jail): {message}", file=sys.stderr, flush=True)
    sys.exit(125)


def _enc(x):
    return None if x is None else os.fsencode(x)


def _mount(source, target, fstype, flags: int, data=None) -> None:
    if _LIBC.mount(_enc(source), _enc(target), _enc(fstype), flags, _enc(data)) != 0:
        _fail(f"cannot mount {source} on {target}: {os.strerror(ctypes.get_errno())}")


def loopback_up() -> None:
    """Set ``lo`` up (``SIOCGIFFLAGS``/``SIOCSIFFLAGS``): the namespace's only interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", __import__("fcntl").ioctl(s, 0x8913, req))[1]
        __import__("fcntl").ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))


def _mkdirs(path: str) -> None:
    os.makedirs(path, 0o755, exist_ok=True)


def _bind(new_root: str, path: str, writable: bool) -> None:
    """``path`` at the same place under ``new_root``; read-only unless ``writable``. A symbolic link
    (``/bin -> usr/bin``) is recreated as one, never followed to somewhere else."""
    target = new_root + path
    if os.path.islink(path):
        _mkdirs(os.path.dirname(target))
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        return
    if os.path.isdir(path):
        _mkdirs(target)
    else:
        _mkdirs(os.path.dirname(target))
        if not os.path.lexists(target):
            open(target, "a").close()
    _mount(path, target, None, _MS_BIND | _MS_REC)
    flags = _MS_REMOUNT | _MS_BIND | _MS_NOSUID | _MS_NODEV | (0 if writable else _MS_RDONLY)
    _mount(None, target, None, flags)


def new_root(new_root: str, read_only: list, writable: list) -> None:
    """Make ``new_root`` (an empty folder) the root of this mount namespace, holding only the system folders,
    ``read_only`` and ``writable`` (each at its own path), and fresh /proc, /dev, /tmp and /dev/shm."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount("npusim-root", new_root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=16m")
    _mkdirs(new_root + "/proc")
    _mount("proc", new_root + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_RDONLY)
    _mkdirs(new_root + "/dev")
    _mount("npusim-dev", new_root + "/dev", "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=755,size=64k")
    for name in _DEVICES:
        open(f"{new_root}/dev/{name}", "a").close()
        _mount(f"/dev/{name}", f"{new_root}/dev/{name}", None, _MS_BIND)
    for path, size in (("/tmp", "512m"), ("/dev/shm", "64m")):
        _mkdirs(new_root + path)
        _mount("npusim-tmp", new_root + path, "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode=1777,size={size}")
    for path in SYSTEM:
        if os.path.lexists(path):
            _bind(new_root, path, False)
    for path in read_only:
        _bind(new_root, path, False)
    for path in writable:
        _bind(new_root, path, True)
    old = new_root + "/.old-root"
    _mkdirs(old)
    number = _PIVOT_ROOT.get(platform.machine())
    if number is None or _LIBC.syscall(number, _enc(new_root), _enc(old)) != 0:
        _fail(f"pivot_root: {os.strerror(ctypes.get_errno()) if number else 'unknown machine'}")
    os.chdir("/")
    if _LIBC.umount2(b"/.old-root", _MNT_DETACH) != 0:
        _fail(f"cannot detach the old root: {os.strerror(ctypes.get_errno())}")
    os.rmdir("/.old-root")
    _mount(None, "/", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def drop_capabilities() -> None:
    """Without a user of its own (``copy``): keep the namespace's uid 0 but no capability at all, now or
    after an ``exec`` (securebits ``noroot``, locked), so mounts cannot be undone."""
    if _LIBC.prctl(_PR_SET_SECUREBITS, _SECBITS_LOCKED_NOROOT, 0, 0, 0) != 0:
        _fail(f"prctl(securebits): {os.strerror(ctypes.get_errno())}")
    for cap in range(64):
        _LIBC.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)     # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    if _LIBC.capset(header, data) != 0:
        _fail(f"capset: {os.strerror(ctypes.get_errno())}")


def main(argv: list) -> None:
    p = argparse.ArgumentParser(prog="jail.py")
    p.add_argument("--root-dir", help="an empty folder to build the new root in")
    p.add_argument("--ro", action="append", default=[], help="a folder visible read-only (same path)")
    p.add_argument("--rw", action="append", default=[], help="a folder visible read-write (same path)")
    p.add_argument("--loopback", action="store_true", help="bring lo up (in a new network namespace)")
    p.add_argument("--give", action="append", default=[], help="a file handed to --uid (chown)")
    p.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                   help=f"a resource limit ({', '.join(_LIMITS)}), soft and hard")
    p.add_argument("--uid", type=int, help="run COMMAND as this user (and group of the same number)")
    p.add_argument("--chdir", help="the working folder of COMMAND")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="COMMAND's whole environment")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        _fail("no command")
    if args.loopback:
        loopback_up()
    if args.root_dir:
        new_root(args.root_dir, args.ro, args.rw)
    for path in args.give:
        if args.uid is not None and not os.path.islink(path):
            os.chown(path, args.uid, args.uid)
    for item in args.limit:
        name, value = item.split("=", 1)
        resource.setrlimit(_LIMITS[name], (int(value), int(value)))
    if args.uid is not None:
        os.setgroups([])
        os.setgid(args.uid)
        os.setuid(args.uid)
        if os.getuid() != args.uid or os.geteuid() != args.uid:
            _fail(f"could not become user {args.uid}")
    else:
        drop_capabilities()
    # unshare --kill-child's SIGKILL on its end is cleared by a change of user: set it again
    if _LIBC.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0) != 0:
        _fail(f"prctl(pdeathsig): {os.strerror(ctypes.get_errno())}")
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail(f"prctl(no_new_privs): {os.strerror(ctypes.get_errno())}")
    if args.chdir:
        os.chdir(args.chdir)
    env = dict(item.split("=", 1) for item in args.env)
    try:
        os.execvpe(command[0], command, env)
    except OSError as e:
        _fail(f"cannot run {command[0]}: {e.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
