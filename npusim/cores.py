"""The chip's core split: which kind of core each block of a launch runs on, and what that core holds.

An Atlas A2 (910B) AI core is one Cube core (AIC: L1, L0A, L0B, L0C, the Cube and Fixpipe) paired with two
Vector cores (AIV: a UB each and the vector unit), which exchange data through GM [S1]. Ascend C says which
cores a kernel needs with its kernel type [S3 设置Kernel类型]:

- ``aiv_only`` (KERNEL_TYPE_AIV_ONLY): one block per AIV, up to ``vector_cores`` (48) at once;
- ``aic_only`` (KERNEL_TYPE_AIC_ONLY): one block per AIC, up to ``num_cores`` (24) at once;
- ``mix_aic_1_2`` (KERNEL_TYPE_MIX_AIC_1_2): a block is one AIC and its two AIVs, each running the kernel
  (branch with ``ascend_is_aic()`` / ``ascend_is_aiv()`` of :mod:`npusim.chipsync`;
  ``get_sub_block_idx()`` tells the AIVs apart; an AIV's :func:`npusim.get_block_idx` is ``2 * block + sub_block``).

``launch(..., kernel_type=None)`` infers the type from the names the kernel's code (and the plain
functions it calls) uses: Cube positions and instructions only -> ``aic_only``; Vector ones only ->
``aiv_only``; both in one body -> ``coupled``: one AI core that holds both units, as on the 910 (a
difference from the hardware, where such a kernel is written as ``mix_aic_1_2``). Presets whose cores
are coupled (``classic``) run every kernel that way. Should an inferred kernel still ask for a memory its
core lacks (a position the scan could not see) before it has touched GM, the launch starts again on
coupled cores (:mod:`npusim.launch`); a kernel type given to launch is always obeyed.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from functools import partial
from typing import Callable

from .errors import UsageError

AIV_ONLY, AIC_ONLY, MIX, COUPLED = "aiv_only", "aic_only", "mix_aic_1_2", "coupled"
KERNEL_TYPES = (AIV_ONLY, AIC_ONLY, MIX, COUPLED)
_ALIASES = {"mix_aiv_1_0": AIV_ONLY, "mix_aic_1_0": AIC_ONLY}   # the pure types that may cross-core sync [S2]

#: memories of each kind of core ("coupled": all of them)
MEMORIES = {"aiv": ("UB",), "aic": ("L1", "L0A", "L0B", "L0C")}

_CUBE_NAMES = frozenset({"A1", "B1", "A2", "B2", "CO1", "TSCM", "mmad", "load_data", "load_data_3d", "fixpipe"})
# TBuf() is VECCALC by default: it counts as Vector (TBuf(A1) then reads as both, i.e. coupled: the safe side)
_VECTOR_NAMES = frozenset({"VECIN", "VECOUT", "VECCALC", "CO2", "TBuf"})
# the API's own modules: their code is the simulator, not the kernel's
_API_PREFIXES = ("npusim.instructions", "npusim.memory", "npusim.core", "npusim.tensor", "npusim.chipsync",
                 "npusim.launch", "npusim.params", "npusim.pipes", "npusim.numerics", "npusim.errors")


def parse_kernel_type(kernel_type: str | None) -> str | None:
    """``"aiv_only"``, ``"KERNEL_TYPE_AIV_ONLY"``, ... -> the canonical name (None stays None)."""
    if kernel_type is None:
        return None
    if isinstance(kernel_type, str):
        k = kernel_type.lower().removeprefix("kernel_type_")
        k = _ALIASES.get(k, k)
        if k in KERNEL_TYPES:
            return k
    raise UsageError(f"kernel_type must be one of {', '.join(map(repr, KERNEL_TYPES))}, not {kernel_type!r}",
                     hint="aiv_only: vector work on the Vector cores; aic_only: Cube work; mix_aic_1_2: one AIC "
                          "and two AIV per block (Ascend C's KERNEL_TYPE_*); None infers it from the kernel")


def _names(fn, seen: set, depth: int) -> set[str]:
    """The global and attribute names used by ``fn``'s code and by the plain functions it calls."""
    code = getattr(fn, "__code__", None)
    if code is None or id(code) in seen or depth > 6:
        return set()
    seen.add(id(code))
    out: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        out.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    glob = getattr(fn, "__globals__", {})
    cells = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _filled(c)]
    values = [glob.get(n) for n in out] + cells + list(getattr(fn, "__defaults__", None) or ())
    # ``module.helper(...)``: the attributes the code names, of the modules it names
    # (from the module's dict: getattr would run a module's __getattr__, e.g. numpy's deprecation warnings)
    values += [vars(m).get(n) for m in values if isinstance(m, types.ModuleType) for n in out]
    out |= position_names(values)
    for v in values:
        for f in _callees(v):
            if not (f.__module__ or "").startswith(_API_PREFIXES):
                out |= _names(f, seen, depth + 1)
    return out


def position_names(values) -> set[str]:
    """The names of the TPositions among ``values`` (a position held in a variable, passed as an argument)."""
    from .pipes import TPosition

    return {v.name for v in values if isinstance(v, TPosition)}


def _callees(v) -> list:
    """The plain functions behind a value a kernel uses: itself, a partial's function, a class's methods."""
    if isinstance(v, partial):
        v = v.func
    if isinstance(v, types.MethodType):
        v = v.__func__
    if isinstance(v, types.FunctionType):
        return [v]
    if not isinstance(v, (type, types.ModuleType, types.BuiltinFunctionType)) and hasattr(v, "__dict__") \
            and not type(v).__module__.startswith(("builtins", "numpy", "npusim.tensor", "npusim.memory")):
        v = type(v)   # an object the kernel is given (a plan, a tiling): its class's methods
    if isinstance(v, type) and not v.__module__.startswith(("builtins", "numpy")):
        out = []
        for klass in v.__mro__[:-1]:
            for m in vars(klass).values():
                m = m.__func__ if isinstance(m, (staticmethod, classmethod)) else m
                if isinstance(m, types.FunctionType):
                    out.append(m)
        return out
    return []


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


_INFERRED: dict[tuple, str] = {}


def infer_kernel_type(kernel_fn: Callable, args=()) -> str:
    """``aic_only``, ``aiv_only`` or ``coupled`` from the names ``kernel_fn`` uses and the positions among
    its launch ``args`` (see the module docs); memoised per kernel and argument types."""
    try:
        key = (kernel_fn, tuple(type(a) for a in args), frozenset(position_names(args)))
        hash(key)
    except TypeError:
        key = None
    k = _INFERRED.get(key) if key is not None else None
    if k is None:
        k = _infer(kernel_fn, args)
        if key is not None:
            if len(_INFERRED) > 512:
                _INFERRED.clear()
            _INFERRED[key] = k
    return k


def _infer(kernel_fn: Callable, args) -> str:
    names = _names(kernel_fn, set(), 0) | position_names(args)
    for a in args:   # the objects a kernel is given: their classes' methods
        for f in _callees(a):
            names |= _names(f, set(), 1)
    cube, vec = bool(names & _CUBE_NAMES), bool(names & _VECTOR_NAMES)
    if cube and vec:
        return COUPLED
    return AIC_ONLY if cube else AIV_ONLY


@dataclass(frozen=True)
class Plan:
    """How a launch maps onto the chip: ``units`` per block (3 for MIX: AIC, AIV 0, AIV 1) and
    ``active`` units running at once (unit ``u`` starts when unit ``u - active`` has ended: waves)."""

    kernel_type: str
    inferred: bool
    block_dim: int
    units_per_block: int
    active: int

    @property
    def n_units(self) -> int:
        return self.block_dim * self.units_per_block

    def unit(self, u: int) -> tuple[str | None, int, int]:
        """(core kind ``"aic"``/``"aiv"``/None for coupled, the block index the kernel sees, sub-block)."""
        if self.kernel_type == MIX:
            b, r = divmod(u, 3)
            return ("aic", b, 0) if r == 0 else ("aiv", 2 * b + r - 1, r - 1)
        kind = {AIV_ONLY: "aiv", AIC_ONLY: "aic"}.get(self.kernel_type)
        return kind, u, 0

    def label(self, u: int) -> str:
        """``aiv(7)`` / ``aic(3)`` as msSanitizer names blocks, ``block 3`` on a coupled core."""
        kind, b, _ = self.unit(u)
        return f"{kind}({b})" if kind else f"block {b}"


def plan(cfg, kernel_fn: Callable, block_dim: int, kernel_type: str | None, args=()) -> Plan:
    """The :class:`Plan` of launching ``kernel_fn`` on ``block_dim`` blocks of ``cfg``."""
    k = parse_kernel_type(kernel_type)
    inferred = k is None
    if not cfg.split_cores:
        if k not in (None, COUPLED):
            raise UsageError(f"kernel_type={k!r} needs a chip with separate Cube and Vector cores; "
                             f"'{cfg.name}' has coupled AI cores",
                             hint="leave kernel_type out on this preset (every core has both units), or use a2")
        return Plan(COUPLED, inferred, block_dim, 1, min(block_dim, cfg.num_cores))
    if k is None:
        k = infer_kernel_type(kernel_fn, args)
    if k == AIV_ONLY:
        return Plan(k, inferred, block_dim, 1, min(block_dim, cfg.vector_cores))
    if k == MIX:
        per = 1 + cfg.aiv_per_core
        return Plan(k, inferred, block_dim, per, per * min(block_dim, cfg.num_cores))
    return Plan(k, inferred, block_dim, 1, min(block_dim, cfg.num_cores))


class KernelTypeError(UsageError):
    """A core asked for a memory its kind does not have (see :func:`check_memory`)."""


def coupled_plan(cfg, block_dim: int) -> Plan:
    """The plan of a launch on coupled cores (both units in each), ``min(block_dim, num_cores)`` at once."""
    return Plan(COUPLED, True, block_dim, 1, min(block_dim, cfg.num_cores))


def check_memory(core, name: str) -> None:
    """Refuse a memory the running core does not have (an AIV has no L1/L0x, an AIC no UB)."""
    kind = core.kind
    if kind is None or name in MEMORIES[kind]:
        return
    other = "aic" if kind == "aiv" else "aiv"
    how = "inferred from the kernel's code" if core.plan.inferred else "given to launch"
    unit = {"aiv": "Vector core (AIV)", "aic": "Cube core (AIC)"}
    raise KernelTypeError(
        f"{name} is not in a {unit[kind]}: this kernel runs as {core.plan.kernel_type} ({how}) on "
        f"'{core.cfg.name}', whose {unit[kind]}s hold {', '.join(MEMORIES[kind])}; {name} belongs to the "
        f"{unit[other]}",
        hint="give launch the kernel_type the kernel needs: 'mix_aic_1_2' runs one AIC and two AIV per block "
             "(branch on ns.ascend_is_aic() / ns.ascend_is_aiv() and exchange data through GM), "
             "'coupled' one AI core with both units as on the 910")
