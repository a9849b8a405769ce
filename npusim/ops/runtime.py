"""Calling a registered operator: validate, infer shapes, tile (with a cache), launch.

Two stages, as in aclnn [S3 单算子API调用]::

    ws, executor = ops.get_workspace_size("matmul", a, b)   # validate, infer, tile; nothing runs
    result = ops.execute(executor)                          # allocate the workspace, launch the kernel

or both at once: ``ops.call("matmul", a, b)``. Host tiling runs on every call for a new shape (dynamic
shapes); a :class:`TilingCache` keyed by the op, shapes, dtypes, attributes and hardware makes repeated
shapes free.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

import numpy as np

from ..config import HardwareConfig, get_config
from ..dtypes import as_dtype
from ..launch import launch
from ..profile import Profile
from .opdef import InferContext, OpDef, OpError, TilingData

REGISTRY: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    """Add an operator to the registry (OP_ADD); registering a name again replaces it."""
    if op.infer_shape_fn is None or op.tiling_fn is None or not (op.kernels or op.run_fn):
        raise OpError(f"{op.name}: an operator needs infer_shape, tiling and a kernel (or a run function) "
                      f"to register")
    REGISTRY[op.name] = op
    return op


def get(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise OpError(f"no operator named {name!r}; registered: {sorted(REGISTRY)}") from None


@dataclass
class CacheStats:
    """Counters of a tiling cache: ``hit_rate = hits / (hits + misses)``; ``tiling_s`` is host time spent
    computing tilings, ``saved_s`` the time the hits would have cost (each hit is credited with what
    computing its entry took)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    tiling_s: float = 0.0
    saved_s: float = 0.0

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0


class TilingCache:
    """An LRU cache of tilings (``capacity`` entries; 0 disables caching), keyed by :meth:`key`."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.entries: OrderedDict[Hashable, tuple[TilingData, float]] = OrderedDict()
        self.stats = CacheStats()

    def key(self, ctx: InferContext) -> Hashable:
        """What a call's tiling depends on: by default :func:`cache_key` (op, shapes, dtypes, attributes,
        hardware). A subclass may key more coarsely, e.g. on shapes rounded up to what the kernel computes
        anyway, as long as every call with the same key can use the same tiling."""
        return cache_key(ctx)

    def get(self, key: Hashable, compute: Callable[[], TilingData]) -> tuple[TilingData, bool, float]:
        """(tiling, hit, host seconds spent now)."""
        hit = self.entries.get(key)
        if hit is not None:
            self.entries.move_to_end(key)
            self.stats.hits += 1
            self.stats.saved_s += hit[1]
            return hit[0], True, 0.0
        t0 = time.perf_counter()
        tiling = compute()
        spent = time.perf_counter() - t0
        self.stats.misses += 1
        self.stats.tiling_s += spent
        if self.capacity > 0:
            self.entries[key] = (tiling, spent)
            if len(self.entries) > self.capacity:
                self.entries.popitem(last=False)
                self.stats.evictions += 1
        return tiling, False, spent

    def clear(self) -> None:
        self.entries.clear()
        self.stats = CacheStats()


DEFAULT_CACHE = TilingCache()


def _freeze(v: Any) -> Hashable:
    if isinstance(v, np.ndarray):
        return ("array", v.shape, v.dtype.name, v.tobytes())
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def cache_key(ctx: InferContext) -> Hashable:
    """What a tiling depends on: op, input shapes and dtypes, attributes, hardware."""
    return (ctx.op, tuple(ctx.input_shapes), tuple(d.name if d is not None else None for d in ctx.input_dtypes),
            _freeze(ctx.attrs), ctx.config.key)


@dataclass
class Executor:
    """A validated, tiled call waiting to run (aclOpExecutor)."""

    op: OpDef
    ctx: InferContext
    tiling: TilingData
    inputs: list[np.ndarray | None]
    outputs: list[np.ndarray]
    cache_hit: bool
    tiling_s: float


@dataclass
class OpResult:
    """Outputs of an operator call, its device profile and what the host did."""

    outputs: list[np.ndarray]
    profile: Profile  # the main kernel's
    tiling: TilingData
    cache_hit: bool
    tiling_s: float
    launches: list[tuple[str, Profile]] = field(default_factory=list)  # every launch, in execution order

    @property
    def device_us(self) -> float:
        """Device time of every launch of the call (kernels back to back, launch overheads excluded)."""
        return sum(p.time_us for _, p in self.launches) if self.launches else self.profile.time_us

    def __getitem__(self, i: int) -> np.ndarray:
        return self.outputs[i]

    @property
    def out(self) -> np.ndarray:
        """The first (usually only) output."""
        return self.outputs[0]


def get_workspace_size(name: str, *inputs: np.ndarray | None, out: list[np.ndarray] | None = None,
                       formats: tuple[str | None, ...] = (), config: HardwareConfig | str | None = None,
                       cache: TilingCache | None = None, **attrs: Any) -> tuple[int, Executor]:
    """Stage 1 (aclnnXxxGetWorkspaceSize): check the call, infer output shapes and dtypes, run the host
    tiling (or take it from ``cache``), allocate outputs; returns the workspace size and an executor."""
    op = get(name)
    cfg = get_config(config)
    ctx, combo = op.validate(inputs, attrs, formats, cfg)
    shapes = [tuple(int(d) for d in s) for s in op.infer_shape_fn(ctx)]
    if op.infer_dtype_fn is not None:
        dtypes = [np.dtype(d) for d in op.infer_dtype_fn(ctx)]
    else:
        dtypes = [as_dtype(decl.dtypes[combo]) for decl in op.outputs]
    if len(shapes) != len(op.outputs) or any(min(s, default=1) < 0 for s in shapes):
        raise OpError(f"{name}: shape inference gave {shapes} for outputs {[d.name for d in op.outputs]}")
    ctx.output_shapes, ctx.output_dtypes = shapes, dtypes
    cache = DEFAULT_CACHE if cache is None else cache
    tiling, hit, spent = cache.get(cache.key(ctx), lambda: op.tiling_fn(ctx))
    if op.run_fn is None and tiling.tiling_key not in op.kernels:
        raise OpError(f"{name}: tiling chose key {tiling.tiling_key}, but kernels exist for {sorted(op.kernels)}")
    if out is None:
        out = [np.zeros(s, d) for s, d in zip(shapes, dtypes)]
    else:
        for o, s, d, decl in zip(out, shapes, dtypes, op.outputs):
            if o.shape != s or o.dtype != d:
                raise OpError(f"{name}: output '{decl.name}' must be {d.name} {s}, got {o.dtype.name} {o.shape}")
    padded = list(inputs) + [None] * (len(op.inputs) - len(inputs))
    return tiling.workspace_bytes, Executor(op, ctx, tiling, padded, list(out), hit, spent)


def call_title(ex: Executor) -> str:
    """The call as the learner wrote it, for the progress line: ``ops.call("matmul", 1024x1024, 1024x1024)``
    (the operator's kernel functions, e.g. ``_matmul_float``, are internal names)."""
    shapes = ", ".join("x".join(map(str, np.shape(a))) or "scalar" for a in ex.inputs if a is not None)
    return f'ops.call("{ex.op.name}"' + (f", {shapes})" if shapes else ")")


def execute(executor: Executor, workspace: np.ndarray | None = None, *, sanitize: str = "error",
            progress: bool | None = None) -> OpResult:
    """Stage 2 (aclnnXxx): launch the kernel of the executor's tiling key on its block_dim. ``progress``:
    the launch's progress line (:func:`npusim.launch`: True, None once it takes 2 s, False)."""
    ex = executor
    if ex.tiling.block_dim == 0:   # nothing to compute: the outputs were allocated as zeros
        idle = Profile.idle(ex.op.name, ex.ctx.config)
        return OpResult(ex.outputs, idle, ex.tiling, ex.cache_hit, ex.tiling_s, [])
    inputs = ex.op.prepare_fn(ex.ctx, ex.tiling, ex.inputs) if ex.op.prepare_fn else ex.inputs
    if ex.op.run_fn is not None:
        launches = ex.op.run_fn(ex.ctx, ex.tiling, inputs, ex.outputs, sanitize)
        main = next((p for n, p in launches if n == ex.op.name), launches[0][1])
        return OpResult(ex.outputs, main, ex.tiling, ex.cache_hit, ex.tiling_s, launches)
    args: list[Any] = [a for a in inputs if a is not None] + ex.outputs
    if ex.tiling.workspace_bytes:
        if workspace is None:
            workspace = np.zeros(ex.tiling.workspace_bytes, np.uint8)
        if workspace.nbytes < ex.tiling.workspace_bytes:
            raise OpError(f"{ex.op.name}: workspace of {workspace.nbytes} B, {ex.tiling.workspace_bytes} B needed")
        args.append(workspace)
    run = launch(ex.op.kernels[ex.tiling.tiling_key], ex.tiling.block_dim, *args, ex.tiling,
                 config=ex.ctx.config, sanitize=sanitize, progress=progress, progress_title=call_title(ex))
    return OpResult(ex.outputs, run.profile, ex.tiling, ex.cache_hit, ex.tiling_s, [(ex.op.name, run.profile)])


def call(name: str, *inputs: np.ndarray | None, config: HardwareConfig | str | None = None,
         cache: TilingCache | None = None, sanitize: str = "error", progress: bool | None = None,
         **attrs: Any) -> OpResult:
    """Validate, tile and run operator ``name`` on numpy inputs (both stages); ``progress`` as for
    :func:`execute`."""
    _, ex = get_workspace_size(name, *inputs, config=config, cache=cache, **attrs)
    return execute(ex, sanitize=sanitize, progress=progress)
