"""``npusim bench``: how fast the simulator runs, beside the same tile loop in plain numpy (the floor).

The cases live in this package, one module per area (``core``: vector add and matmul; ``conv``;
``explorers``: the redraw of every lab's explorer, one case per lab found from ``solutions/``), each a
function ``repeat -> dict`` decorated with :func:`case`; :func:`load` imports every module here, so a new
case is a new module (or function) in ``npusim/bench/``. The cases import the code they measure; nothing
below this package imports it.

Each case prints one JSON object per line: ``kernel``, ``sim_s`` (median wall seconds per launch with
numerics, timing and sanitizer on), ``numpy_s`` (median of the numpy floor), ``ratio = sim_s / numpy_s``,
``instructions``, ``sim_cycles``, ``us_per_instruction = sim_s / instructions`` (over every launch of the
case: what one simulated instruction costs, the figure a per-instruction regression moves), and the
targets (``initcheck``: what initialisation tracking costs; ``scaling``: cost per element / per MAC over
sizes). Simulator and floor runs alternate, so that a noisy, shared machine slows both alike; compare the
ratio, not the seconds. ``docs/cost-model.md`` ("How fast the simulator runs") has the figures, the
Triton interpreter's beside them and how they were measured.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import statistics
import sys
import time
from typing import Callable


CASES: dict[str, Callable[[int], dict]] = {}
SLOW: set[str] = set()
"""Cases that take minutes: they run only when named (``npusim bench --only name``)."""


def case(name: str, slow: bool = False):
    """Register a benchmark case: a function ``repeat -> dict`` of figures (``npusim bench --only name``);
    a ``slow`` one runs only when named."""
    def deco(fn):
        CASES[name] = fn
        if slow:
            SLOW.add(name)
        return fn
    return deco


#: The simulation :func:`measure` timed last (the ``initcheck`` case times it again, with initcheck off).
LAST_SIM: list[Callable[[], object]] = []


def measure(sim: Callable[[], object], floor: Callable[[], object] | None, repeat: int) -> tuple[float, float, object]:
    """Median seconds of ``sim`` and ``floor`` over ``repeat`` alternating runs after one warm-up each."""
    LAST_SIM[:] = [sim]
    result = sim()
    if floor:
        floor()
    ts, tf = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = sim()
        ts.append(time.perf_counter() - t0)
        if floor:
            t0 = time.perf_counter()
            floor()
            tf.append(time.perf_counter() - t0)
    return statistics.median(ts), (statistics.median(tf) if tf else float("nan")), result


def line(kernel: str, sim_s: float, numpy_s: float, profile, **extra) -> dict:
    """A case's JSON object: the fields every case shares (from ``profile``, if given), then ``extra``."""
    d = {"kernel": kernel, "sim_s": round(sim_s, 5), "numpy_s": round(numpy_s, 5),
         "ratio": round(sim_s / numpy_s, 2) if numpy_s == numpy_s and numpy_s > 0 else None}
    if profile is not None:
        d.update(instructions=profile.instruction_count, sim_cycles=round(profile.total_cycles),
                 sim_time_us=round(profile.time_us, 3))
    d.update(extra)
    n = d.get("instructions_total", d.get("instructions"))
    if n:
        d["us_per_instruction"] = round(sim_s * 1e6 / n, 2)
    if "target_sim_s" in d:   # within the targets on this run (a loaded machine misses them)
        d["meets_targets"] = sim_s <= d["target_sim_s"] and (d["ratio"] or 0) <= d.get("target_ratio", float("inf"))
    return d


def run(repeat: int = 5, only: list[str] | None = None) -> int:
    """Print one JSON line per case (all but the slow ones, or those named in ``only``), with progress on
    stderr; 2 if a name is unknown, 1 if a case failed (its line says why)."""
    cases = load()
    names = only or [n for n in cases if n not in SLOW]
    unknown = [n for n in names if n not in cases]
    if unknown:
        print(json.dumps({"error": f"unknown case(s) {unknown}; known: {sorted(cases)}"}))
        return 2
    failed = 0
    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {name} ...", file=sys.stderr, flush=True)
        try:
            out = cases[name](repeat)
        except Exception as e:  # noqa: BLE001 - one broken case must not hide the others' figures
            out = {"kernel": name, "error": f"{type(e).__name__}: {e}"}
        failed += "error" in out
        print(json.dumps(out), flush=True)
    return 1 if failed else 0


def describe() -> str:
    """Every case with the first line of its docstring (for ``npusim bench --help``)."""
    lines = []
    for name, fn in load().items():
        doc = (fn.__doc__ or "").strip().splitlines()
        slow = " (slow: only with --only)" if name in SLOW else ""
        lines.append(f"  {name:26s} {doc[0] if doc else ''}{slow}")
    return "\n".join(lines)


def load() -> dict[str, Callable[[int], dict]]:
    """Every case: imports each module of this package (``core`` first, then by name), which registers its
    ``@case`` functions. Adding a case is adding a module here; nothing lists them."""
    mods = sorted((m.name for m in pkgutil.iter_modules(__path__)), key=lambda name: (name != "core", name))
    for name in mods:
        importlib.import_module(f"{__name__}.{name}")
    return CASES
