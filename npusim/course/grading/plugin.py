"""The pytest plugin of the grader's nbval run (``-p npusim.course.grading.plugin``; the grader's side: it
runs as the grader, from the grader's own package, never inside the sandbox). It starts nbval's kernel in
the submission's sandbox (``--npusim-sandbox``: the command line and Unix-socket address the sandbox gives,
see :mod:`.sandbox`), numbers cells as Jupyter does (``In [10]`` for the tenth cell run), notices a dead
kernel within a second instead of waiting for the cell timeout, caps the output a cell may send, asks the
kernel after each cell whether the checks and the seed are still as imported (:mod:`.integrity`), and
logs each cell's error name, message, ``PASSED`` line and that verdict."""

from __future__ import annotations

import ast
import json
import os
import queue
import re
import time
from pathlib import Path
from typing import Any

DEFAULT_OUTPUT_CAP = 10_000_000        # characters of output one cell may send before the rest is cut
MAX_MESSAGE = 4000                     # characters of an error message kept for feedback
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` without terminal colours, cut to ``limit`` characters."""
    text = ANSI.sub("", text or "").strip()
    return text if len(text) <= limit else text[:limit] + " [...]"


class KernelDied(RuntimeError):
    """The kernel process ended while a cell ran."""


_STATE: dict[str, Any] = {"log": None, "cap": DEFAULT_OUTPUT_CAP, "chars": 0, "capped": False, "sandbox": None}
VERDICT = "__import__('sys').modules['sitecustomize'].verdict()"
VERDICT_TIMEOUT = 10.0


def pytest_addoption(parser) -> None:
    group = parser.getgroup("npusim-grade", "npusim grade (internal)")
    group.addoption("--npusim-grade-log", default=None, help="write one JSON line per executed cell here")
    group.addoption("--npusim-output-cap", type=int, default=DEFAULT_OUTPUT_CAP,
                    help="characters of output a cell may send before the rest is dropped")
    group.addoption("--npusim-sandbox", default=None, help="start the kernel as this JSON file says")


def pytest_configure(config) -> None:
    log = config.getoption("npusim_grade_log", None)
    if not log:
        return
    _STATE["log"] = Path(log)
    _STATE["cap"] = int(config.getoption("npusim_output_cap"))
    sandbox = config.getoption("npusim_sandbox", None)
    if sandbox:
        _STATE["sandbox"] = json.loads(Path(sandbox).read_text(encoding="utf-8"))
        _start_in_sandbox()
    _patch_nbval()


def _start_in_sandbox() -> None:
    """nbval's kernel: the sandbox's command line, ZeroMQ over Unix sockets in the kernel's home (its
    network namespace has no way to the grader), interrupts sent as messages (a signal would stop at
    ``unshare``)."""
    import nbval.kernel
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import KernelManager

    spec = _STATE["sandbox"]

    def start_new_kernel(startup_timeout=60, kernel_name="python", **kwargs):
        km = KernelManager(transport="ipc", ip=spec["ip"], connection_file=spec["connection_file"])
        km.kernel_name = "npusim-sandbox"
        km._kernel_spec = KernelSpec(argv=spec["argv"], display_name="npusim grade sandbox", language="python",
                                     interrupt_mode="message", env={})
        km.start_kernel(stderr=kwargs.get("stderr"), cwd=spec["cwd"])
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=startup_timeout)
        except RuntimeError:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            raise
        _record_namespace(km.provisioner.process.pid, Path(spec["cwd"]) / "namespace.json")
        return km, kc

    nbval.kernel.start_new_kernel = start_new_kernel


def _record_namespace(unshare_pid: int, path: Path) -> None:
    """Write down the kernel's PID namespace (``pid:[inode]`` of unshare's child, its first process), so
    that the grader can end every process in it, whatever became of the kernel."""
    from .processes import children_of, start_time

    for pid in children_of(unshare_pid):
        try:
            path.write_text(json.dumps({"init": pid, "ns": os.readlink(f"/proc/{pid}/ns/pid"),
                                        "started": start_time(pid)}), encoding="utf-8")
            return
        except OSError:
            continue


def _patch_nbval() -> None:
    """Make nbval's kernel notice a dead kernel within a second, and bound what a cell's output costs."""
    from nbval.kernel import RunningKernel

    if getattr(RunningKernel, "_npusim_patched", False) or not all(
            hasattr(RunningKernel, name) for name in ("get_message", "await_reply", "is_alive")):
        return  # another nbval: run without the patches (a dead kernel then costs a cell timeout)
    get_message = RunningKernel.get_message

    def bounded_get_message(self, stream, timeout=None):
        msg = get_message(self, stream, timeout=timeout)
        if stream == "iopub":
            _bound_output(msg)
        return msg

    def await_reply(self, msg_id, timeout=None):
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        while True:
            wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if wait <= 0:
                raise queue.Empty
            try:
                msg = self.get_message(stream="shell", timeout=wait)
            except queue.Empty:
                if not self.is_alive():
                    raise KernelDied("the Python kernel stopped (crashed or exited) while this cell ran") from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                if msg["content"]["status"] == "aborted":
                    raise RuntimeError("Kernel aborted execution request")
                return

    def execute_cell_input(self, cell_input, allow_stdin=None):
        # stored in history: tracebacks name the cell as Jupyter's Run All would (In [10], not In [1])
        return self.kc.execute(cell_input, store_history=True, allow_stdin=allow_stdin, stop_on_error=False)

    RunningKernel.execute_cell_input = execute_cell_input
    RunningKernel.get_message = bounded_get_message
    RunningKernel.await_reply = await_reply
    RunningKernel._npusim_patched = True


def _bound_output(msg: dict) -> None:
    """Count a cell's output; past the cap, drop the text and data (keep the message's shape). Error
    messages are always clipped."""
    kind, content = msg.get("msg_type"), msg.get("content", {})
    if kind == "error":
        content["evalue"] = clip(str(content.get("evalue", "")), MAX_MESSAGE)
        tb = [str(t) for t in content.get("traceback", [])][-30:]
        content["traceback"] = [t[:2000] for t in tb]
        return
    if kind == "stream":
        size = len(content.get("text", ""))
    elif kind in ("display_data", "execute_result", "update_display_data"):
        size = sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in content.get("data", {}).values())
    else:
        return
    _STATE["chars"] += size
    if _STATE["chars"] > _STATE["cap"]:
        first = not _STATE["capped"]
        _STATE["capped"] = True
        note = "\n[npusim grade: output cut here]\n" if first else ""
        if kind == "stream":
            content["text"] = note
        else:
            content["data"] = {"text/plain": note}


def forged(item) -> str | None:
    """What the kernel says changed in the checks or the seed ("" nothing; None: it could not be asked)."""
    kernel = getattr(item.parent, "kernel", None)
    if kernel is None or not kernel.is_alive():
        return None
    try:
        msg_id = kernel.kc.execute("", silent=True, store_history=False, user_expressions={"v": VERDICT})
        deadline = time.monotonic() + VERDICT_TIMEOUT
        while True:
            msg = kernel.kc.get_shell_msg(timeout=max(0.01, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") == msg_id:
                break
    except (queue.Empty, RuntimeError, OSError):
        return None
    answer = msg["content"].get("user_expressions", {}).get("v", {})
    if answer.get("status") != "ok":
        return "the grader's check of the checks could not run in the kernel (its start-up code was removed)"
    try:
        text = ast.literal_eval(answer["data"]["text/plain"])
    except (KeyError, ValueError, SyntaxError):
        return "the kernel's answer about the checks was not a string"
    return text if isinstance(text, str) else "the kernel's answer about the checks was not a string"


def pytest_runtest_setup(item) -> None:
    _STATE["chars"], _STATE["capped"] = 0, False


def pytest_runtest_makereport(item, call) -> None:
    """Log what the cell did (its error, its PASSED line, its output size) after it ran."""
    if call.when != "call" or _STATE["log"] is None or not hasattr(item, "cell_num"):
        return
    outs = getattr(item, "test_outputs", None)
    seen = outs is not None
    outs = outs or []
    err = next((o for o in outs if o.get("output_type") == "error"), None)
    stdout = "".join(o.get("text", "") for o in outs if o.get("output_type") == "stream" and o.get("name") == "stdout")
    passed = next((line for line in stdout.splitlines() if line.startswith("PASSED ")), "")
    exc = call.excinfo.value if call.excinfo is not None else None
    text = ""
    if exc is not None:
        args = getattr(exc, "args", ())
        text = str(args[1]) if type(exc).__name__ == "NbCellError" and len(args) > 1 else str(exc)
    rec = {
        "cell": item.cell_num,
        "raised": exc is not None,
        "ename": err.get("ename", "") if err else (type(exc).__name__ if exc is not None else ""),
        "evalue": clip(err.get("evalue", "") if err else text),
        "timeout": "Timeout of" in text,
        "kernel_died": isinstance(exc, KernelDied),
        "kernel_dead": "Kernel dead" in text,   # it had died in an earlier cell
        "passed_line": passed[:500] if seen else None,
        "output_chars": _STATE["chars"],
        "output_capped": _STATE["capped"],
        "forged": forged(item) if _STATE["sandbox"] and "Timeout of" not in text else None,
    }
    with open(_STATE["log"], "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
