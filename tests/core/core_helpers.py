"""Helpers shared by the npusim core tests (imported as ``core_helpers``): hypothesis settings, random data, bit views, hand formulas."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, Phase, settings

import npusim as ns

#: hypothesis settings for every generated test of tests/core (small: the suite must stay fast)
FAST = settings(deadline=None, max_examples=20, derandomize=True, database=None,
                phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
FEW = settings(FAST, max_examples=10)

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = {"float16": np.dtype(np.float16), "float32": np.dtype(np.float32)}
UINT_OF = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bit patterns of an array (for bit-exact comparisons, -0.0 != 0.0)."""
    a = np.ascontiguousarray(a)
    return a.view(UINT_OF[a.dtype.itemsize])


def assert_bits_equal(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    bad = np.flatnonzero(bits(actual).ravel() != bits(expected).ravel())
    if bad.size:
        i = bad[0]
        raise AssertionError(f"{what}: {bad.size} of {actual.size} elements differ; first at {i}: "
                             f"got {actual.ravel()[i]!r} expected {expected.ravel()[i]!r}")


def rand(rng: np.random.Generator, shape, dtype, lo: float = -4.0, hi: float = 4.0) -> np.ndarray:
    """Random data of ``dtype`` in [lo, hi) (integers for integer dtypes)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, int(lo)), min(info.max, int(hi)) + 1, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def ints_as(rng: np.random.Generator, shape, dtype, lo: int = -8, hi: int = 8) -> np.ndarray:
    """Small integer values stored in ``dtype``: products and sums of them are exact in every float type."""
    return rng.integers(lo, hi + 1, size=shape).astype(np.dtype(dtype))


def ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


# --- the cost formulas, written out from the docstrings of npusim.costs and the HardwareConfig fields ---
def hand_burst_align(cfg: ns.HardwareConfig, nbytes: int) -> int:
    """``min(512 B, the burst length rounded up to a power of two >= 32 B)``."""
    p = 1 << max(0, (max(nbytes, cfg.gm_burst_granule_bytes) - 1).bit_length())
    return min(cfg.gm_efficient_align_bytes, p)


def hand_burst(cfg: ns.HardwareConfig, addr: int, nbytes: int, rate: float) -> float:
    """``gm_burst_overhead_cycles + ceil(nbytes / 32) * 32 / (rate * eff)``."""
    moved = ceil_to(nbytes, cfg.gm_burst_granule_bytes)
    eff = 1.0 if addr % hand_burst_align(cfg, nbytes) == 0 else cfg.gm_unaligned_efficiency
    return cfg.gm_burst_overhead_cycles + moved / (rate * eff)


def hand_gm(cfg: ns.HardwareConfig, bursts, rate: float) -> float:
    """``gm_startup_cycles + sum of the bursts`` (bursts = [(gm_byte_address, nbytes)]); a burst that
    starts where the previous one ended continues it (one contiguous run)."""
    runs: list[list[int]] = []
    for a, n in bursts:
        if runs and runs[-1][0] + runs[-1][1] == a:
            runs[-1][1] += n
        else:
            runs.append([a, n])
    return cfg.gm_startup_cycles + sum(hand_burst(cfg, a, n, rate) for a, n in runs)


def hand_gm_strided(cfg, first: int, count: int, nbytes: int, stride: int, rate: float) -> float:
    return hand_gm(cfg, [(first + i * stride, nbytes) for i in range(count)], rate)


def hand_vector(cfg: ns.HardwareConfig, count: int, itemsize: int, complex_op: bool = False) -> float:
    if complex_op:
        return cfg.vector_startup_cycles + cfg.vector_complex_cycles_per_repeat * math.ceil(count / 64)
    return cfg.vector_startup_cycles + math.ceil(count * itemsize / cfg.vector_bytes_per_cycle)


def hand_reduce(cfg: ns.HardwareConfig, count: int, itemsize: int) -> float:
    repeats = math.ceil(count * itemsize / cfg.vector_bytes_per_cycle)
    tree = math.ceil(math.log2(repeats)) if repeats > 1 else 0
    return cfg.vector_startup_cycles + repeats + tree + int(math.log2(cfg.vector_bytes_per_cycle // itemsize))


def hand_cube(cfg: ns.HardwareConfig, m: int, n: int, k: int, dtype: str) -> float:
    k0 = 32 // np.dtype(BF16 if dtype == "bfloat16" else dtype).itemsize
    return cfg.cube_startup_cycles + ceil_to(m, 16) * ceil_to(n, 16) * ceil_to(k, k0) / cfg.cube_macs_per_cycle[dtype]


def hand_onchip(cfg: ns.HardwareConfig, nbytes: int, rate: float) -> float:
    return cfg.onchip_startup_cycles + nbytes / rate


def records(result, op: str | None = None, pipe: ns.Pipe | None = None):
    """The profile's instructions (``Instr`` tuples) of one op name and/or pipe, in program order; the
    scalar unit's ``ISSUE`` spans only when asked for by name."""
    out = [ns.profile.Instr(b, ns.Pipe(p), s, e, o, nb, site[0], site[1])
           for (b, p, s, e, o, nb, site) in result.profile.raw_records if o != "ISSUE" or op == "ISSUE"]
    if op is not None:
        out = [r for r in out if r.op == op]
    if pipe is not None:
        out = [r for r in out if r.pipe == pipe]
    return out
