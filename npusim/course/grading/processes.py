"""The processes of a submission, found through ``/proc``: by ancestry and by PID namespace."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


def _uids(entry: Path) -> list[int]:
    """Real, effective, saved and file-system user ids of the process at ``entry`` (empty if it is gone)."""
    try:
        line = next(x for x in (entry / "status").read_text().splitlines() if x.startswith("Uid:"))
        return [int(v) for v in line.split()[1:]]
    except (OSError, StopIteration, ValueError):
        return []


def uids_running() -> set[int]:
    """Every user id some process runs as."""
    return {uid for entry in Path("/proc").glob("[0-9]*") for uid in _uids(entry)}


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc").is_dir() else []:
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc; empty where there is none)."""
    children, found, todo = _children(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill(pids) -> None:
    """SIGKILL each of ``pids`` that still exists."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


def kill_tree(proc: subprocess.Popen) -> None:
    """Kill ``proc``, its process group and every descendant, then reap it."""
    mine = os.getpgrp()
    pids = descendants(proc.pid)
    for pid in [proc.pid, *pids]:
        try:
            pgid = os.getpgid(pid)
            if pgid != mine:
                os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
    kill([proc.pid, *pids])
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def children_of(pid: int) -> list[int]:
    """The direct children of ``pid``."""
    return _children().get(pid, [])


def processes_of_user(uid: int) -> list[int]:
    """Processes whose real, effective or saved user id is ``uid``."""
    return [int(entry.name) for entry in Path("/proc").glob("[0-9]*") if uid in _uids(entry)[:3]]


def in_namespace(ns: str) -> list[int]:
    """Processes in the PID namespace ``ns`` (``pid:[inode]``, as ``/proc/PID/ns/pid`` reads)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if os.readlink(entry / "ns" / "pid") == ns:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, /proc/PID/stat): tells a process from a later one that
    got its number; None if it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _still_first(ns: str, first: int, started: int) -> bool:
    """Whether ``first`` is still the process recorded as the first of namespace ``ns``."""
    try:
        return start_time(first) == started and os.readlink(f"/proc/{first}/ns/pid") == ns
    except OSError:
        return False


def end_namespace(ns: str, first: int | None = None, started: int | None = None) -> None:
    """SIGKILL every process of the PID namespace ``ns`` (its first one first: that alone ends the rest).

    Given its ``first`` process and when that ``started``, only while that process lives: a namespace's
    number is given to a new namespace once it is gone, and the new one may be another submission's
    (another job of this grader, or another grader on the machine). When the first process has ended, the
    kernel has already ended every other process of its namespace."""
    for _ in range(3):
        if first is not None and started is not None and not _still_first(ns, first, started):
            return
        pids = in_namespace(ns)
        if not pids:
            return
        kill(pids)
