"""Run a notebook cell by cell in a fresh kernel and report what each code cell did (used by tests)."""

from __future__ import annotations

import os
import queue
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat


@dataclass
class CellResult:
    index: int            # position among the notebook's cells
    cell_id: str
    tags: list[str]
    source: str
    status: str           # "ok", "error" or "timeout"
    ename: str = ""
    evalue: str = ""
    traceback: str = ""
    seconds: float = 0.0
    outputs: list[dict] = field(default_factory=list)


def run_notebook(path: str | Path, *, timeout: float = 120, cwd: str | Path | None = None,
                 stop_on: set[str] | None = None, strict: bool = False,
                 env: dict[str, str] | None = None, cells: int | None = None) -> list[CellResult]:
    """Execute every code cell of ``path`` (or its first ``cells`` code cells) in order in a new kernel of
    this Python; never raises for a failing cell. ``stop_on``: error names after which to stop (e.g. a
    timeout leaves the kernel busy). ``strict``: failing checks raise (as under grading); off, the notebook
    behaves as for a learner."""
    from jupyter_client.manager import start_new_kernel

    nb = nbformat.read(path, as_version=4)
    kernel_env = dict(os.environ if env is None else env)
    kernel_env.pop("NPUSIM_STRICT", None)
    if strict:
        kernel_env["NPUSIM_STRICT"] = "1"
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(cwd or Path(path).parent),
                              extra_arguments=[], startup_timeout=60, env=kernel_env)
    results: list[CellResult] = []
    try:
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if cells is not None and len(results) >= cells:
                break
            res = CellResult(i, cell.get("id", ""), list(cell.get("metadata", {}).get("tags", [])),
                             cell.source, "ok")
            t0 = time.perf_counter()

            def hook(msg, res=res):
                kind = msg["header"]["msg_type"]
                if kind in ("stream", "display_data", "execute_result", "error"):
                    res.outputs.append({"type": kind, **msg["content"]})
                if kind == "error":
                    res.status = "error"
                    res.ename = msg["content"]["ename"]
                    res.evalue = msg["content"]["evalue"]
                    res.traceback = "\n".join(msg["content"]["traceback"])

            try:
                kc.execute_interactive(cell.source, timeout=timeout, output_hook=hook, allow_stdin=False)
            except (TimeoutError, queue.Empty):
                res.status = "timeout"
                km.interrupt_kernel()
            res.seconds = time.perf_counter() - t0
            results.append(res)
            if res.status == "timeout" or (stop_on and res.ename in stop_on):
                break
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return results


def _text(output: dict) -> str:
    if output["type"] == "stream":
        return output["text"]
    if output["type"] == "error":
        return "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    if "application/vnd.jupyter.widget-view+json" in data:
        return "[widget]"
    if "image/png" in data:
        return "[image]"
    return data.get("text/plain", "")


if __name__ == "__main__":  # pragma: no cover - a debugging aid
    import argparse

    ap = argparse.ArgumentParser(description="run a notebook cell by cell; print each cell's status and time")
    ap.add_argument("notebook")
    ap.add_argument("--outputs", action="store_true", help="also print what each cell showed")
    ap.add_argument("--strict", action="store_true", help="failing checks raise (as under grading)")
    a = ap.parse_args()
    total = 0.0
    for r in run_notebook(a.notebook, strict=a.strict):
        total += r.seconds
        print(f"{r.index:3d} {r.cell_id[:22]:22s} {r.status:7s} {r.seconds:6.2f}s {r.ename} {r.evalue[:100]}")
        if a.outputs:
            for o in r.outputs:
                print("      " + _text(o).rstrip().replace("\n", "\n      "))
    print(f"total {total:.1f} s")
