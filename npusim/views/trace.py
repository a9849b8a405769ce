"""Chrome trace-event JSON of a launch, for Perfetto (ui.perfetto.dev) and chrome://tracing.

Layout follows the msprof simulator's trace: one process per block (named with the core it ran on), one
thread (track) per pipe in the order data flows (MTE2, MTE1, M, V, FIX, MTE3, S), one complete event
(``"ph": "X"``) per instruction with the bytes moved and the source line in ``args``, and a counter
track per on-chip memory with the bytes of live tensors. Times are microseconds (cycles / clock).

:class:`TraceBuilder` is the general writer: model-level traces add host processes and threads, or any
raw event, to the same builder (or pass ``extra_events`` to :func:`to_chrome_trace`).
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Sequence

from ..pipes import PIPE_ORDER
from .style import PIPE_LABELS, as_profile

_ROUND = 6  # microsecond decimals kept: 1 ps, far below one cycle


class TraceBuilder:
    """Collects trace events. Processes and threads get ids (and their name metadata) on first use."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self._pids: dict[str, int] = {}
        self._tids: dict[tuple[int, str], int] = {}
        self.other_data: dict[str, Any] = {}

    def process(self, name: str, sort_index: int | None = None) -> int:
        """The pid of the process called ``name`` (created with its metadata on first use)."""
        pid = self._pids.get(name)
        if pid is None:
            pid = self._pids[name] = len(self._pids) + 1
            self._meta("process_name", pid, 0, {"name": name})
            self._meta("process_sort_index", pid, 0, {"sort_index": pid if sort_index is None else sort_index})
        return pid

    def thread(self, pid: int, name: str, sort_index: int | None = None) -> int:
        """The tid of track ``name`` in process ``pid`` (created with its metadata on first use)."""
        tid = self._tids.get((pid, name))
        if tid is None:
            tid = self._tids[(pid, name)] = sum(1 for p, _ in self._tids if p == pid) + 1
            self._meta("thread_name", pid, tid, {"name": name})
            self._meta("thread_sort_index", pid, tid, {"sort_index": tid if sort_index is None else sort_index})
        return tid

    def _meta(self, what: str, pid: int, tid: int, args: dict) -> None:
        self.events.append({"name": what, "ph": "M", "pid": pid, "tid": tid, "args": args})

    def complete(self, pid: int, tid: int, name: str, ts_us: float, dur_us: float, cat: str = "",
                 args: dict | None = None) -> None:
        """A complete event (``"ph": "X"``): something that ran on a track from ``ts_us`` for ``dur_us``."""
        ts = round(ts_us, _ROUND)
        dur = max(0.0, round(round(ts_us + dur_us, _ROUND) - ts, _ROUND))
        ev = {"name": name, "cat": cat or "npusim", "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid}
        if args:
            ev["args"] = args
        self.events.append(ev)

    def counter(self, pid: int, name: str, ts_us: float, values: dict[str, float]) -> None:
        """A counter sample (``"ph": "C"``): a value track of the process, e.g. live bytes of UB."""
        self.events.append({"name": name, "ph": "C", "ts": round(ts_us, _ROUND), "pid": pid, "tid": 0,
                            "args": dict(values)})

    def instant(self, pid: int, tid: int, name: str, ts_us: float, args: dict | None = None) -> None:
        """An instant event (``"ph": "i"``) on one track."""
        ev = {"name": name, "ph": "i", "s": "t", "ts": round(ts_us, _ROUND), "pid": pid, "tid": tid}
        if args:
            ev["args"] = args
        self.events.append(ev)

    def add(self, events: Iterable[dict]) -> None:
        """Raw events (already in trace-event form), e.g. host tracks of a model-level trace."""
        self.events.extend(dict(e) for e in events)

    def add_profile(self, profile: Any, name: str | None = None, start_us: float = 0.0) -> float:
        """Add a launch: a process per block, a track per pipe, a counter per memory; returns its end (us)."""
        prof = as_profile(profile)
        name = name or prof.kernel
        cfg = prof.config
        to_us = cfg.cycles_to_us
        n = prof.active_cores
        pids = [self.process(f"{name}: block {b} (core {b % n})") for b in range(prof.block_dim)]
        tids = {}
        for b, pid in enumerate(pids):
            for order, p in enumerate(PIPE_ORDER):
                tids[(b, p)] = self.thread(pid, f"{PIPE_LABELS[p]}", sort_index=order)
        for i in prof.instructions:
            self.complete(pids[i.block], tids[(i.block, i.pipe)], i.op, start_us + to_us(i.start),
                          to_us(i.end - i.start), cat=i.pipe.label,
                          args={"bytes": i.nbytes, "source": f"{i.file}:{i.line}", "block": i.block,
                                "core": i.block % n, "cycles": [i.start, i.end]})
        live: dict[tuple[int, str], int] = {}
        for b, t, mem, delta in sorted(prof.occupancy_events, key=lambda ev: (ev[0], ev[1])):
            live[(b, mem)] = live.get((b, mem), 0) + delta
            self.counter(pids[b], f"{mem} live bytes", start_us + to_us(t), {"bytes": live[(b, mem)]})
        self.other_data.setdefault("kernels", []).append(
            {"name": name, "start_us": start_us, "time_us": prof.time_us, "cycles": prof.total_cycles,
             "config": cfg.name, "clock_ghz": cfg.clock_ghz, "block_dim": prof.block_dim})
        return start_us + prof.time_us

    def to_dict(self) -> dict:
        """The trace: metadata first, then events ordered by time (ties keep insertion order)."""
        meta = [e for e in self.events if e.get("ph") == "M"]
        timed = sorted((e for e in self.events if e.get("ph") != "M"), key=lambda e: e.get("ts", 0.0))
        return {"traceEvents": meta + timed, "displayTimeUnit": "ns", "otherData": dict(self.other_data)}

    def write(self, path: str | os.PathLike) -> dict:
        """Write the JSON to ``path`` and return the trace dict."""
        d = self.to_dict()
        with open(path, "w", encoding="utf-8") as f:
            json.dump(d, f, separators=(",", ":"))
        return d


def to_chrome_trace(profiles: Any, path: str | os.PathLike | None = None, *,
                    extra_events: Sequence[dict] = (), gap_us: float = 0.0,
                    builder: TraceBuilder | None = None) -> dict:
    """Chrome trace-event JSON of one launch, or of a list of ``(name, profile)`` (or
    ``(name, profile, start_us)``) launches placed one after another (``gap_us`` apart unless a start is
    given). Returns the trace dict and, with ``path``, writes it there (open it in ui.perfetto.dev).

    Other tracks (e.g. the host side of a model): create them on a ``builder`` and pass it, so their
    process ids never clash with the kernels'; ``extra_events`` are appended as they are.
    """
    tb = builder if builder is not None else TraceBuilder()
    if isinstance(profiles, (list, tuple)):
        t = 0.0
        for item in profiles:
            if not isinstance(item, (list, tuple)) or len(item) not in (2, 3):
                from ..errors import UsageError

                raise UsageError("to_chrome_trace takes a profile or a list of (name, profile) pairs, "
                                 f"got an item {item!r:.80}")
            start = item[2] if len(item) == 3 else t
            t = tb.add_profile(item[1], name=str(item[0]), start_us=start) + gap_us
    else:
        tb.add_profile(profiles)
    tb.add(extra_events)
    return tb.write(path) if path is not None else tb.to_dict()
