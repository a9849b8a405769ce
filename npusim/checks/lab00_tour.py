"""Checks of lab 00 (tour of the NPU): one core's Cube peak, and a copy's cycles from the cost model."""

from __future__ import annotations

import numpy as np

from ..config import a2, classic
from ..launch import launch
from ._core import CheckFailed, call_learner, case_rng, passed
from ._flow import Skeleton

__all__ = ["peak_tflops", "copy_cycles"]

HINTS = {
    "peak-tflops": (
        "A peak is what a unit does when it is busy every cycle: the work it does per cycle times its cycles "
        "per second. The config you are given holds both numbers for the Cube (see the ns.a2 table).",
        "Three factors and a unit. The Cube's fp16 work per cycle is counted in MACs, not in floating-point "
        "operations; the clock is given in GHz; the answer is wanted in TFLOPS. Turn each factor into the unit "
        "of the answer before you multiply, and take every number from the config you are passed (the check "
        "uses configs you have not seen).",
        Skeleton(
            "def peak_tflops(config: ns.HardwareConfig) -> float:\n"
            "    macs_per_cycle = config.cube_macs_per_cycle[\"float16\"]\n"
            "    flops_per_cycle = ___          # one MAC is how many floating-point operations?\n"
            "    cycles_per_second = ___        # config.clock_ghz counts 1e9 cycles per second\n"
            "    return ___                     # FLOP/s in TFLOPS",
            call="check.peak_tflops(peak_tflops)", cells=("00_tou-356a192b",)),
    ),
    "copy-cycles": (
        "Every timing the simulator prints follows from docs/cost-model.md. Find the row of the instruction "
        "you are predicting (a GM -> UB data_copy) and sort its costs into what a copy pays once and what grows "
        "with its bytes.",
        "One contiguous copy is one instruction with one burst. It pays a start-up, the burst's own overhead, "
        "then its bytes at the rate one core gets from GM (config.gm_rate). Look closely at how many bytes a "
        "burst really moves when nbytes is not a whole number of granules (config.gm_burst_granule_bytes). "
        "Every constant is a field of the config you are passed.",
        Skeleton(
            "def copy_cycles(config: ns.HardwareConfig, nbytes: int) -> float:\n"
            "    moved = ___          # the bytes the burst really moves\n"
            "    once = ___           # the cycles a copy pays whatever its size (two fields of the config)\n"
            "    return once + ___    # and the moved bytes at the rate one core gets",
            call="check.copy_cycles(copy_cycles)", cells=("00_tou-356a192b",)),
    ),
}

# configs the learner has not seen: a formula that hard-codes a2's numbers fails on them
_HIDDEN_CONFIGS = (a2, classic, a2.replace(name="a2-slow", clock_ghz=1.2),
                   a2.replace(name="a2-int8-fast", cube_macs_per_cycle={"float16": 2048, "int8": 8192,
                                                                        "float32": 512}))


def _as_number(check: str, value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise CheckFailed(check, f"{what} must be a number (a float), got {type(value).__name__} {value!r}")
    if not np.isfinite(value):
        raise CheckFailed(check, f"{what} is {value!r}, not a finite number")
    return float(value)


def _ratio_cause(got: float, want: float, cfg) -> str:
    """The likely mistake behind got / want, from the ratios that known mistakes give."""
    if cfg is not a2 and abs(got - a2.cube_peak_flops("float16") / 1e12) < 1e-9:
        return " That is a2's answer: compute it from the fields of the config you are given."
    ratio = got / want
    known = [(0.5, "half the peak: one MAC is two floating-point operations (a multiply and an add)"),
             (1e3, "1000x too much: the answer is in TFLOPS (1e12 FLOP/s), not GFLOPS"),
             (1e-3, "1000x too little: clock_ghz is in units of 1e9 cycles per second"),
             (float(cfg.num_cores), f"{cfg.num_cores}x: that is the whole chip; the question is ONE core"),
             (cfg.cube_macs_per_cycle.get("int8", 0) / cfg.cube_macs_per_cycle["float16"],
              "the int8 rate: use the fp16 MACs per cycle")]
    for r, why in known:
        if r and abs(ratio - r) < 1e-6 * r:
            return f" That is {why}."
    return " Look at: work per cycle x 2 FLOPs per MAC x cycles per second, in units of 1e12."


def peak_tflops(fn) -> None:
    """Lab 00, exercise 1: ``fn(config) -> float``, one core's peak fp16 Cube TFLOPS, on presets including
    ones the lab never shows."""
    __tracebackhide__ = True
    name = "peak_tflops"
    for cfg in _HIDDEN_CONFIGS:
        want = cfg.cube_peak_flops("float16") / 1e12
        got = _as_number(name, call_learner(name, fn, cfg), f"peak_tflops({cfg.name})")
        if abs(got - want) > 1e-6 * want:
            raise CheckFailed(name, f"for the config '{cfg.name}' (clock {cfg.clock_ghz} GHz, "
                                    f"{cfg.cube_macs_per_cycle['float16']} fp16 MACs per cycle) expected "
                                    f"{want:.4f} TFLOPS, got {got:.6g}." + _ratio_cause(got, want, cfg))
    passed(name, f"{len(_HIDDEN_CONFIGS)} configs, including two you have not seen")


def _copy_kernel(x, y, n):
    import npusim as ns

    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
    pipe.init_buffer(q, 1, n * x.dtype.itemsize)
    t = q.alloc_tensor(x.dtype)
    if (n * x.dtype.itemsize) % 32:
        ns.data_copy_pad(t, x, n)
    else:
        ns.data_copy(t, x, n)
    q.enque(t)
    t = q.deque()
    ns.data_copy_pad(y, t, n)
    q.free_tensor(t)


def simulated_copy_cycles(cfg, nbytes: int) -> float:
    """What the simulator charges for one GM -> UB copy of ``nbytes`` (a 512 B-aligned GM address)."""
    x = np.zeros(nbytes, np.uint8) if nbytes % 2 else np.zeros(nbytes // 2, np.float16)
    prof = launch(_copy_kernel, 1, x, np.zeros_like(x), x.size, config=cfg).profile
    copy = next(i for i in prof.instructions if i.pipe.name == "MTE2")
    return copy.end - copy.start


_COPY_FIXED = [  # (config, nbytes): whole granules, one granule, less than one, not a multiple of 32, a wider port
    (a2, 8192), (a2, 32), (a2, 1000), (a2, 2), (classic, 65536),
    (a2.replace(name="a2-wide", gm_port_bytes_per_cycle=128), 4096),
    (a2.replace(name="a2-other-dma", gm_startup_cycles=100, gm_burst_overhead_cycles=3), 3000),
]


def _copy_cause(cfg, nbytes: int, got: float, want: float) -> str:
    g = cfg.gm_burst_granule_bytes
    rate = cfg.gm_rate(1)
    base = cfg.gm_startup_cycles + cfg.gm_burst_overhead_cycles
    if abs(got - (base + nbytes / rate)) < 1e-6 and nbytes % g:
        return (f" Your number moves exactly {nbytes} B; a burst moves whole {g} B granules "
                f"({-(-nbytes // g) * g} B here): round the bytes up.")
    if abs(got - (base + (nbytes // g) * g / rate)) < 1e-6 and nbytes % g:
        return f" You rounded the bytes down; a burst moves whole {g} B granules: round up."
    if abs(got - (want - cfg.gm_startup_cycles)) < 1e-6:
        return f" {cfg.gm_startup_cycles:g} cycles short: the DMA start-up (gm_startup_cycles) is missing."
    if abs(got - (want - cfg.gm_burst_overhead_cycles)) < 1e-6:
        return f" {cfg.gm_burst_overhead_cycles:g} cycle(s) short: the burst's own overhead is missing."
    if cfg.gm_port_bytes_per_cycle != a2.gm_port_bytes_per_cycle or cfg.gm_startup_cycles != a2.gm_startup_cycles:
        return (" This config has other DMA numbers than a2 (see its fields): take every constant from the "
                "config, and the rate from config.gm_rate(1).")
    return " Look at: the GM DMA row of docs/cost-model.md (start-up, one burst, 32 B granules, the GM rate)."


def copy_cycles(fn, predicted_1000=None) -> None:
    """Lab 00, exercise 2: ``fn(config, nbytes) -> float``, the cycles of one contiguous GM -> UB copy of
    ``nbytes`` on one core from a 512 B-aligned address, to the cycle; ``predicted_1000``: the learner's
    own prediction for 1000 B on a2 (a number or a function returning it), made before running it."""
    __tracebackhide__ = True
    name = "copy_cycles"
    rng = case_rng(name, "random")
    cases = list(_COPY_FIXED) + [(a2, int(rng.integers(1, 65536))) for _ in range(3)]
    for cfg, nbytes in cases:
        want = simulated_copy_cycles(cfg, nbytes)
        got = _as_number(name, call_learner(name, fn, cfg, nbytes), f"copy_cycles({cfg.name}, {nbytes})")
        if abs(got - want) > 1e-6 * want:
            raise CheckFailed(name, f"on [config={cfg.name}, nbytes={nbytes}] the simulator's copy took "
                                    f"{want:g} cycles, you predicted {got:g}." + _copy_cause(cfg, nbytes, got, want))
    if predicted_1000 is not None:
        pred = call_learner(name, predicted_1000) if callable(predicted_1000) else predicted_1000
        got = _as_number(name, pred, "your prediction for 1000 B")
        want = simulated_copy_cycles(a2, 1000)
        if abs(got - want) > 1e-6 * want:
            raise CheckFailed(name, f"your function is right, but your hand prediction for 1000 B was {got:g} "
                                    f"cycles and the copy takes {want:g}." + _copy_cause(a2, 1000, got, want))
    passed(name, f"{len(cases)} copies predicted to the cycle (sizes that are not whole granules, other DMA "
                 f"configs)")
