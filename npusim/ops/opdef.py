"""OpDef: an operator's declaration, modelled on Ascend C's ``OpDef`` [S3 算子原型定义].

An operator declares its inputs and outputs (names, the dtype/format combinations it supports), its
attributes, a shape-inference and a dtype-inference function, a host tiling function, and one kernel per
tiling key::

    op = OpDef("add")
    op.input("x", dtypes=["float16", "float32"]).input("y", dtypes=["float16", "float32"])
    op.output("z", dtypes=["float16", "float32"])

    @op.infer_shape
    def _(ctx): return [ctx.input_shapes[0]]

    @op.tiling
    def _(ctx): return TilingData(block_dim=8, tiling_key=0, fields={"tile": 4096})

    @op.kernel(0)
    def _(x, y, z, tiling): ...

As in Ascend C, the i-th entries of every ``dtypes`` (and ``formats``) list together form the i-th supported
combination: a call whose input dtypes match none is refused with the list of what is supported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..config import HardwareConfig
from ..dtypes import as_dtype
from ..errors import UsageError

REQUIRED = object()


class OpError(UsageError):
    """A call that does not match the operator's declaration (dtype, format, shape or attribute)."""


@dataclass(frozen=True)
class TensorDecl:
    name: str
    dtypes: tuple[str, ...]
    formats: tuple[str, ...]
    optional: bool = False


@dataclass(frozen=True)
class AttrDecl:
    name: str
    kind: type | tuple[type, ...]
    default: Any = REQUIRED
    check: Callable[[Any], bool] | None = None
    doc: str = ""


@dataclass
class TilingData:
    """What the host tiling function hands the kernel (TilingData + SetBlockDim + SetTilingKey +
    the workspace size in Ascend C). ``block_dim=0``: there is nothing to compute (an empty output, or
    an empty sum such as a matmul with K = 0): the outputs keep their zeros and no kernel is launched."""

    block_dim: int
    tiling_key: int = 0
    fields: dict[str, Any] = field(default_factory=dict)
    workspace_bytes: int = 0

    def __getattr__(self, name: str) -> Any:  # tiling.tile reads fields["tile"], like GET_TILING_DATA
        try:
            return self.__dict__["fields"][name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class InferContext:
    """What shape/dtype inference and tiling see: the call's shapes, dtypes, formats and attributes."""

    op: str
    input_shapes: list[tuple[int, ...] | None]
    input_dtypes: list[np.dtype | None]
    attrs: dict[str, Any]
    config: HardwareConfig
    formats: list[str | None] = field(default_factory=list)
    output_shapes: list[tuple[int, ...]] = field(default_factory=list)
    output_dtypes: list[np.dtype] = field(default_factory=list)

    def fail(self, message: str) -> None:
        """Refuse the call with a clear OpError."""
        raise OpError(f"{self.op}: {message}")


class OpDef:
    """The declaration of one operator (see the module docstring)."""

    def __init__(self, name: str, doc: str = "") -> None:
        self.name = name
        self.doc = doc
        self.inputs: list[TensorDecl] = []
        self.outputs: list[TensorDecl] = []
        self.attrs: dict[str, AttrDecl] = {}
        self.infer_shape_fn: Callable[[InferContext], list[tuple[int, ...]]] | None = None
        self.infer_dtype_fn: Callable[[InferContext], list[np.dtype]] | None = None
        self.tiling_fn: Callable[[InferContext], TilingData] | None = None
        self.prepare_fn: Callable[[InferContext, TilingData, list], list] | None = None
        self.run_fn: Callable | None = None
        self.kernels: dict[int, Callable] = {}

    # --- declaration (fluent, like Input("x").DataType({...}).Format({...})) -------------------------
    def input(self, name: str, dtypes: Sequence[str], formats: Sequence[str] | None = None,
              optional: bool = False) -> "OpDef":
        self.inputs.append(TensorDecl(name, tuple(as_dtype(d).name for d in dtypes),
                                      tuple(formats or ["ND"] * len(dtypes)), optional))
        return self

    def output(self, name: str, dtypes: Sequence[str], formats: Sequence[str] | None = None) -> "OpDef":
        self.outputs.append(TensorDecl(name, tuple(as_dtype(d).name for d in dtypes),
                                       tuple(formats or ["ND"] * len(dtypes))))
        return self

    def attr(self, name: str, kind: type | tuple[type, ...], default: Any = REQUIRED,
             check: Callable[[Any], bool] | None = None, doc: str = "") -> "OpDef":
        self.attrs[name] = AttrDecl(name, kind, default, check, doc)
        return self

    def infer_shape(self, fn):
        """Decorator: ``fn(ctx) -> [output shapes]``."""
        self.infer_shape_fn = fn
        return fn

    def infer_dtype(self, fn):
        """Decorator: ``fn(ctx) -> [output dtypes]`` (default: the matched dtype combination)."""
        self.infer_dtype_fn = fn
        return fn

    def tiling(self, fn):
        """Decorator: the host tiling function ``fn(ctx) -> TilingData``."""
        self.tiling_fn = fn
        return fn

    def prepare(self, fn):
        """Decorator: host-side data preparation before launch, ``fn(ctx, tiling, inputs) -> kernel inputs``
        (e.g. packing weights into a fractal format, as a framework does once per weight)."""
        self.prepare_fn = fn
        return fn

    def run(self, fn):
        """Decorator for operators that launch more than one kernel (e.g. layout transforms around the
        main kernel): ``fn(ctx, tiling, inputs, outputs, sanitize) -> [(name, Profile), ...]`` in execution
        order; the launch named like the operator is its main kernel. Without it, the op launches
        ``kernels[tiling.tiling_key]`` once."""
        self.run_fn = fn
        return fn

    def kernel(self, tiling_key: int = 0):
        """Decorator: the kernel for ``tiling_key``: ``kernel(*inputs, *outputs, tiling)``."""
        def deco(fn):
            self.kernels[tiling_key] = fn
            return fn
        return deco

    # --- checking a call -------------------------------------------------------------------------
    def combinations(self) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """The supported (input dtypes, output dtypes) combinations."""
        n = len(self.inputs[0].dtypes) if self.inputs else 0
        return [(tuple(d.dtypes[i] for d in self.inputs), tuple(d.dtypes[i] for d in self.outputs))
                for i in range(n)]

    def validate(self, arrays: Sequence[Any], attrs: dict[str, Any], formats: Sequence[str | None],
                 config: HardwareConfig) -> tuple[InferContext, int]:
        """Check a call against the declaration; returns the inference context and the matched combination."""
        if len(arrays) > len(self.inputs):
            raise OpError(f"{self.name} takes {len(self.inputs)} inputs "
                          f"({', '.join(d.name for d in self.inputs)}), got {len(arrays)}")
        arrays = list(arrays) + [None] * (len(self.inputs) - len(arrays))
        for decl, a in zip(self.inputs, arrays):
            if a is None and not decl.optional:
                raise OpError(f"{self.name}: input '{decl.name}' is required")
            if a is not None and not isinstance(a, np.ndarray):
                raise OpError(f"{self.name}: input '{decl.name}' must be a numpy array, got {type(a).__name__}")
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            raise OpError(f"{self.name}: unknown attribute(s) {sorted(unknown)}; it has {sorted(self.attrs)}")
        full = {}
        for name, decl in self.attrs.items():
            v = attrs.get(name, decl.default)
            if v is REQUIRED:
                raise OpError(f"{self.name}: attribute '{name}' is required ({decl.doc})")
            if v is not None and not isinstance(v, decl.kind):
                raise OpError(f"{self.name}: attribute '{name}' must be {decl.kind}, got {v!r}")
            if decl.check is not None and v is not None and not decl.check(v):
                raise OpError(f"{self.name}: attribute {name}={v!r} is not valid ({decl.doc})")
            full[name] = v
        got = tuple(a.dtype.name if a is not None else None for a in arrays)
        fmts = list(formats) + [None] * (len(self.inputs) - len(formats))
        match = None
        for i, (ins, _) in enumerate(self.combinations()):
            if all(g is None or g == d for g, d in zip(got, ins)) and all(
                    f is None or a is None or f == decl.formats[i] for f, a, decl in zip(fmts, arrays, self.inputs)):
                match = i
                break
        if match is None:
            combos = "; ".join(f"({', '.join(ins)}) -> ({', '.join(outs)})" for ins, outs in self.combinations())
            raise OpError(f"{self.name} does not support input dtypes ({', '.join(str(g) for g in got)})"
                          + (f" with formats {fmts}" if any(fmts) else "") + f"; supported: {combos}")
        ctx = InferContext(self.name, [a.shape if a is not None else None for a in arrays],
                           [a.dtype if a is not None else None for a in arrays], full, config,
                           [decl.formats[match] for decl in self.inputs])
        return ctx, match

    def __repr__(self) -> str:
        ins = ", ".join(d.name for d in self.inputs)
        outs = ", ".join(d.name for d in self.outputs)
        return f"OpDef({self.name}: ({ins}) -> ({outs}), attrs {sorted(self.attrs)}, kernels {sorted(self.kernels)})"
