"""Chrome trace-event JSON: schema (as Perfetto and chrome://tracing read it) and content."""

from __future__ import annotations

import json

import pytest

import npusim as ns
from npusim.pipes import PIPE_ORDER
from npusim.views import TraceBuilder, to_chrome_trace
from npusim.views.charts import PIPE_LABELS

pytestmark = pytest.mark.views

_NUM = (int, float)
_REQUIRED = {"X": ("name", "ph", "ts", "dur", "pid", "tid"), "M": ("name", "ph", "pid", "tid", "args"),
             "C": ("name", "ph", "ts", "pid", "args"), "i": ("name", "ph", "ts", "pid", "tid")}
_META = {"process_name": "name", "process_sort_index": "sort_index", "thread_name": "name",
         "thread_sort_index": "sort_index"}


def validate(trace: dict) -> None:
    """The subset of the trace-event format npusim writes, checked strictly."""
    assert set(trace) >= {"traceEvents"}
    assert trace.get("displayTimeUnit", "ms") in ("ms", "ns")
    json.dumps(trace)  # serialisable as is
    last: dict[tuple, float] = {}
    named_threads, named_procs = set(), set()
    for ev in trace["traceEvents"]:
        ph = ev.get("ph")
        assert ph in _REQUIRED, f"unexpected ph {ph!r}"
        for key in _REQUIRED[ph]:
            assert key in ev, f"{ph} event without {key}: {ev}"
        assert isinstance(ev["name"], str) and ev["name"]
        assert isinstance(ev["pid"], int) and isinstance(ev.get("tid", 0), int)
        if "args" in ev:
            assert isinstance(ev["args"], dict)
        if ph == "M":
            assert ev["name"] in _META
            value = ev["args"][_META[ev["name"]]]
            assert isinstance(value, str if _META[ev["name"]] == "name" else int)
            if ev["name"] == "thread_name":
                named_threads.add((ev["pid"], ev["tid"]))
            if ev["name"] == "process_name":
                named_procs.add(ev["pid"])
            continue
        assert isinstance(ev["ts"], _NUM) and ev["ts"] >= 0
        if ph == "X":
            assert isinstance(ev["dur"], _NUM) and ev["dur"] >= 0
            assert (ev["pid"], ev["tid"]) in named_threads, "X event on an unnamed track"
            track = (ev["pid"], ev["tid"])
            # one pipe runs one instruction at a time: events of a track start after the previous ended
            assert ev["ts"] >= last.get(track, 0.0) - 1e-9, f"overlap or disorder on {track}"
            last[track] = ev["ts"] + ev["dur"]
        if ph == "C":
            assert all(isinstance(v, _NUM) for v in ev["args"].values())
        assert ev["pid"] in named_procs


def test_single_launch_schema_and_content(mm, tmp_path):
    path = tmp_path / "mm.json"
    trace = to_chrome_trace(mm, path)
    validate(trace)
    assert json.loads(path.read_text()) == json.loads(json.dumps(trace))
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(mm.instructions)  # instructions plus the scalar unit's ISSUE spans
    clock = mm.config.clock_ghz * 1e3  # cycles per us
    by_start = sorted(mm.instructions, key=lambda i: (i.start, i.pipe))
    first = min(xs, key=lambda e: e["ts"])
    assert first["ts"] == pytest.approx(by_start[0].start / clock, abs=1e-6)
    total = sum(e["dur"] for e in xs if e["cat"] == "PIPE_M")
    assert total == pytest.approx(mm.pipe_busy_cycles["cube"] / clock, rel=1e-6)
    mmad = next(e for e in xs if e["name"] == "mmad")
    assert mmad["args"]["source"].endswith(f"matmul.py:{mmad['args']['source'].rsplit(':', 1)[1]}")
    assert isinstance(mmad["args"]["bytes"], int)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {PIPE_LABELS[p] for p in PIPE_ORDER}
    procs = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert procs == ["matmul: block 0 (core 0)"]
    assert max(e["ts"] + e["dur"] for e in xs) == pytest.approx(mm.time_us, abs=1e-5)


def test_one_process_per_block_and_memory_counters(vadd_multi):
    trace = to_chrome_trace(vadd_multi)
    validate(trace)
    procs = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert procs == [f"vector_add: block {b} (core {b})" for b in range(4)]
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert {e["name"] for e in counters} == {"UB live bytes"}
    assert max(e["args"]["bytes"] for e in counters) <= vadd_multi.reserved_bytes["UB"]
    assert counters[-1]["args"]["bytes"] == 0  # everything freed at the end


def test_several_launches_back_to_back_with_extra_events(vadd, vadd_fast):
    host = TraceBuilder()
    pid = host.process("host")
    tid = host.thread(pid, "python")
    host.complete(pid, tid, "launch", 0.0, 1.0)
    marker = {"name": "step 0", "ph": "i", "s": "g", "ts": 0.5, "pid": pid, "tid": tid}
    trace = to_chrome_trace([("slow", vadd), ("fast", vadd_fast)], builder=host, extra_events=[marker])
    validate(trace)
    procs = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert procs == ["host", "slow: block 0 (core 0)", "fast: block 0 (core 0)"]
    assert any(e["name"] == "step 0" for e in trace["traceEvents"])
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] != "launch"]
    slow_pids = {e["pid"] for e in trace["traceEvents"]
                 if e["name"] == "process_name" and e["args"]["name"].startswith("slow")}
    fast = [e for e in xs if e["pid"] not in slow_pids]
    assert min(e["ts"] for e in fast) >= vadd.time_us - 1e-6
    assert [k["name"] for k in trace["otherData"]["kernels"]] == ["slow", "fast"]
    assert any(e["name"] == "launch" for e in trace["traceEvents"])


def test_bad_input_is_a_usage_error(vadd):
    with pytest.raises(ns.UsageError):
        to_chrome_trace([vadd])
