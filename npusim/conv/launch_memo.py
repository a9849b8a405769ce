"""Simulate each layout transform of the img2col convolution once per L2 state: the profile and the L2 it
leaves memoised, the values computed on the host bit for bit.

The conv2d operator runs three launches on one L2 (:func:`npusim.ops.conv`): NCHW -> NC1HWC0, the
convolution, NHWC -> NCHW. Many convolutions of a network share their input shape (ResNet-18: every conv
of a stage, before and after a fusion pass), so their input transform is the same launch again. A
launch's profile depends on its arguments' shapes and dtypes, its scalar arguments, the NPU
configuration, the sanitizer mode and the state of the L2 lines of its own arguments, never on the
values (the transforms do not branch on data). With the footprint L2 (:mod:`npusim.l2`) a line's fate
depends only on its own last use relative to the cache's clock, so the L2 part of the key is, per
argument: absent, or its lines' ``used - clock`` (every evicted line counted alike) and ``high``. The
memo stores the profile and what the launch did to the L2: how far the clock moved and its arguments'
line states after it (relative to the clock); a reuse advances the clock and installs those states under
the new arrays' host memory, so the next launch (the convolution reading ``x5`` from L2) sees exactly
the L2 a simulation would have left. The values come from :mod:`npusim.conv.replay`.

``tests/conv/test_launch_memo.py`` checks that a conv2d call with the memo gives profiles (all three
launches), L2 state and output bits equal to a fresh simulation. :func:`disabled` turns it off.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np

import npusim as ns

from ..l2 import L2Cache, current_shared
from ..memo import BoundedCache
from .host import identity_zz
from . import replay, transform

_CACHE: BoundedCache[tuple] = BoundedCache(256)
"""``key -> (profile, clock delta, [argument line states after the launch])`` for the Python session."""
stats = _CACHE.stats
_enabled = [True]


@contextmanager
def disabled() -> Iterator[None]:
    """Inside the block every transform is simulated (to compare the memo against)."""
    _enabled.append(False)
    try:
        yield
    finally:
        _enabled.pop()


def clear() -> None:
    """Forget every memoised transform."""
    _CACHE.clear()


def _addr(a: np.ndarray) -> tuple:
    return (a.__array_interface__["data"][0], a.nbytes)   # the L2's buffer key (npusim.memsys.register)


def _state_in(l2: L2Cache | None, arrays: list[np.ndarray]) -> tuple | None:
    """The part of the L2 state the launch can see (module docstring), or None if not a footprint L2."""
    if l2 is None:
        return ("cold",)
    if type(l2) is not L2Cache:
        return None
    keys = [_addr(a) for a in arrays]
    if len(set(keys)) != len(keys):   # an array passed twice: not a case the snapshot handles
        return None
    out = []
    for k in keys:
        b = l2._buffers.get(k)
        if b is None:
            out.append(None)
            continue
        used, _ = b.arrays()
        rel = np.maximum(used - l2.clock, -l2.capacity_lines)   # evicted lines are all alike
        out.append((b.nlines, b.high, rel.tobytes()))
    return (l2.capacity_lines, tuple(out))


def _state_out(l2: L2Cache, arrays: list[np.ndarray]) -> list:
    states = []
    for a in arrays:
        b = l2._buffers.get(_addr(a))
        if b is None:
            states.append(None)
            continue
        used, ready = b.arrays()
        states.append((b.nlines, b.high, used - l2.clock, ready.copy()))
    return states


def _install(l2: L2Cache, arrays: list[np.ndarray], delta: int, states: list) -> None:
    l2.begin_launch()   # as the simulated launch's MemorySystem does, before its first access
    l2.clock += delta
    for a, st in zip(arrays, states):
        if st is None:
            continue
        nlines, high, rel, ready = st
        b = l2.buffer(_addr(a), nlines)
        b.fresh.clear()
        b._used, b._ready = rel + l2.clock, ready.copy()
        b.high = high


def _memoised(name: str, arrays: list[np.ndarray], scalars: tuple, config, block_dim: int, sanitize: str,
              simulate: Callable[[], tuple[np.ndarray, ns.Profile]], host: Callable[[], np.ndarray],
              out: np.ndarray) -> tuple[np.ndarray, ns.Profile]:
    cfg = ns.get_config(config)
    l2 = current_shared()
    state = _state_in(l2, arrays) if _enabled[-1] else None
    if state is None:
        return simulate()
    key = (name, tuple((a.shape, a.dtype.str) for a in arrays), scalars, block_dim, cfg.key, sanitize, state)
    hit = _CACHE.get(key)
    if hit is not None:
        stats["hits"] += 1
        prof, delta, states = hit
        np.copyto(out, host())
        if l2 is not None:
            _install(l2, arrays, delta, states)
        return out, prof
    stats["misses"] += 1
    clock0 = 0 if l2 is None else l2.clock
    res, prof = simulate()
    if l2 is not None:
        delta, states = l2.clock - clock0, _state_out(l2, arrays)
    else:
        delta, states = 0, []
    _CACHE.put(key, (prof, delta, states))
    return res, prof


def to_nc1hwc0(x: np.ndarray, *, config=None, block_dim: int = 1,
               sanitize: str = "error") -> tuple[np.ndarray, ns.Profile]:
    """:func:`npusim.conv.transform.to_nc1hwc0` without padding, memoised (module docstring) when the
    Cube does the transpose."""
    cfg = ns.get_config(config)
    x = np.ascontiguousarray(x)
    if not transform.cube_transposes(x.dtype, cfg) or x.dtype.name not in ("float16", "float32"):
        return transform.to_nc1hwc0(x, config=cfg, block_dim=block_dim, sanitize=sanitize)
    n, c, h, w = x.shape
    c0 = 32 // x.dtype.itemsize
    chunk = 128 if x.dtype.itemsize == 2 else 64
    x5 = np.empty((n, -(-c // c0), h, w, c0), dtype=x.dtype)
    eye = identity_zz(chunk, x.dtype)

    def simulate():
        res = ns.launch(transform.nchw_to_nc1hwc0, block_dim, x, eye, x5, (n, c, h, w), (0, 0), chunk,
                        config=cfg, sanitize=sanitize)
        return res["x5"], res.profile

    return _memoised("nchw_to_nc1hwc0", [x, eye, x5], (chunk,), cfg, block_dim, sanitize, simulate,
                     lambda: replay.to_nc1hwc0(x), x5)


def to_nchw(y: np.ndarray, *, config=None, block_dim: int = 1,
            sanitize: str = "error") -> tuple[np.ndarray, ns.Profile]:
    """:func:`npusim.conv.transform.to_nchw`, memoised (module docstring) when the Cube does the transpose."""
    cfg = ns.get_config(config)
    y = np.ascontiguousarray(y)
    if not transform.cube_transposes(y.dtype, cfg) or y.dtype.name not in ("float16", "float32"):
        return transform.to_nchw(y, config=cfg, block_dim=block_dim, sanitize=sanitize)
    n, h, w, c = y.shape
    out = np.empty((n, c, h, w), dtype=y.dtype)
    eye = identity_zz(16, y.dtype)

    def simulate():
        res = ns.launch(transform.nhwc_to_nchw, block_dim, y, eye, out, (n, h * w, c), config=cfg,
                        sanitize=sanitize)
        return res["out"], res.profile

    return _memoised("nhwc_to_nchw", [y, eye, out], (), cfg, block_dim, sanitize, simulate,
                     lambda: replay.to_nchw(y), out)
