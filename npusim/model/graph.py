"""The model graph: a list of nodes in execution (topological) order, each one op with one output tensor.

A tensor is named after the node that produces it, so ``node.inputs`` lists node names. Nodes of op
``"input"`` are the graph's inputs, the single node of op ``"output"`` lists its results. Parameters are
float32 numpy arrays (``node.params``: ``w``, ``b``, BatchNorm's ``mean``/``var``/``gamma``/``beta``);
``node.placement`` says where the op runs: ``"device"`` (the simulated NPU) or ``"host"`` (the CPU).

The graph is deliberately small and plain (no torch needed): :func:`npusim.model.capture` builds one from
a ``torch.nn.Module`` with ``torch.fx``; :mod:`npusim.model.zoo` builds the labs' models directly; the
passes of :mod:`npusim.model.passes` rewrite it.
"""

from __future__ import annotations

import copy as _copy
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from ..errors import UsageError

HOST, DEVICE = "host", "device"


@dataclass
class Node:
    """One op of the graph (see the module docstring)."""

    name: str
    op: str
    inputs: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, np.ndarray] = field(default_factory=dict)
    placement: str = HOST
    fused: list[str] = field(default_factory=list)
    """Names of the original nodes merged into this one by a pass (for display)."""

    def describe(self) -> str:
        """``op(attr=value, ...)`` with the non-default attributes."""
        attrs = ", ".join(f"{k}={v}" for k, v in self.attrs.items())
        return f"{self.op}({attrs})" if attrs else self.op

    def signature(self) -> tuple:
        """Everything that defines the node, parameters by value (for comparing graphs)."""
        return (self.name, self.op, tuple(self.inputs), tuple(sorted((k, repr(v)) for k, v in self.attrs.items())),
                tuple(sorted((k, v.shape, v.dtype.name, v.tobytes()) for k, v in self.params.items())),
                self.placement, tuple(self.fused))


class Graph:
    """Nodes in execution order (see the module docstring). ``shapes`` (name -> shape) and ``dtypes`` are
    filled by :func:`npusim.model.opset.infer` for a given input shape."""

    def __init__(self, nodes: list[Node] | None = None, name: str = "model") -> None:
        self.nodes: list[Node] = list(nodes or [])
        self.name = name

    # --- access ----------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, name: str) -> bool:
        return any(n.name == name for n in self.nodes)

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise UsageError(f"graph '{self.name}' has no node {name!r}; it has {[n.name for n in self.nodes]}")

    def __getitem__(self, name: str) -> Node:
        return self.node(name)

    @property
    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "input"]

    @property
    def output(self) -> Node:
        outs = [n for n in self.nodes if n.op == "output"]
        if len(outs) != 1:
            raise UsageError(f"graph '{self.name}' needs exactly one output node, has {len(outs)}")
        return outs[0]

    def users(self, name: str) -> list[Node]:
        """Nodes that read the tensor ``name`` (once each, in order)."""
        return [n for n in self.nodes if name in n.inputs]

    def ops(self) -> list[str]:
        """The op of every node, in order (a quick look at the structure)."""
        return [n.op for n in self.nodes]

    # --- editing (passes) ------------------------------------------------------------------------
    def copy(self) -> "Graph":
        """A deep copy (parameters included): passes return new graphs and never change their input."""
        return Graph([_copy.deepcopy(n) for n in self.nodes], self.name)

    def rename_uses(self, old: str, new: str) -> None:
        """Every node that reads ``old`` reads ``new`` instead."""
        for n in self.nodes:
            n.inputs = [new if i == old else i for i in n.inputs]

    def bypass(self, name: str) -> Node:
        """Remove node ``name`` and let its users read its first input instead (for a node whose effect is
        now done elsewhere, e.g. a BatchNorm folded into the conv before it). Returns the removed node."""
        node = self.node(name)
        if not node.inputs:
            raise UsageError(f"cannot bypass {name!r}: it has no input")
        self.nodes.remove(node)
        self.rename_uses(name, node.inputs[0])
        return node

    def validate(self) -> None:
        """Names unique, every input produced earlier, exactly one output node."""
        seen: set[str] = set()
        for n in self.nodes:
            if n.name in seen:
                raise UsageError(f"graph '{self.name}': node name {n.name!r} is used twice")
            for i in n.inputs:
                if i not in seen:
                    raise UsageError(f"graph '{self.name}': node {n.name!r} reads {i!r}, which is not produced "
                                     "before it")
            if n.placement not in (HOST, DEVICE):
                raise UsageError(f"node {n.name!r}: placement must be 'host' or 'device', got {n.placement!r}")
            seen.add(n.name)
        self.output  # noqa: B018  (raises unless there is exactly one)

    def signature(self) -> tuple:
        """The whole graph by value: two graphs with equal signatures are the same model."""
        return tuple(n.signature() for n in self.nodes)

    def side(self, name: str) -> str:
        """Where tensor ``name`` is produced: its node's placement; the graph's inputs start on the host."""
        node = self.node(name)
        return HOST if node.op == "input" else node.placement

    def crossings(self) -> list[tuple[str, str, str]]:
        """The PCIe copies the placement implies, in execution order: ``(tensor, "h2d" or "d2h", node)`` for
        each tensor read on the other side than where it was produced, once per direction (``node`` is its
        first reader there); the result is read on the host (the output node)."""
        where: dict[str, set[str]] = {}
        out = []
        for n in self.nodes:
            if n.op == "input":
                where[n.name] = {HOST}
                continue
            side = HOST if n.op == "output" else n.placement
            for t in dict.fromkeys(n.inputs):
                if side not in where[t]:
                    where[t].add(side)
                    out.append((t, "h2d" if side == DEVICE else "d2h", n.name))
            where[n.name] = {side}
        return out

    # --- display ---------------------------------------------------------------------------------
    def rows(self) -> list[tuple[str, str, str, str]]:
        """(name, op and attributes, inputs, placement) per node."""
        out = []
        for n in self.nodes:
            what = n.describe() + (f"  [fused: {', '.join(n.fused)}]" if n.fused else "")
            out.append((n.name, what, ", ".join(n.inputs), n.placement if n.op not in ("input", "output") else ""))
        return out

    def census(self) -> str:
        """How many nodes of each op the graph has, and where they run (a whole network at a glance)."""
        from ..tables import text_table

        counts: dict[tuple[str, str], int] = {}
        for n in self.nodes:
            if n.op not in ("input", "output"):
                counts[(n.op, n.placement)] = counts.get((n.op, n.placement), 0) + 1
        rows = [(op, str(k), where) for (op, where), k in counts.items()]
        return f"{self.name}: {sum(counts.values())} ops\n" + text_table(rows, ("op", "nodes", "runs on"))

    def summary(self) -> str:
        from ..tables import text_table

        return text_table(self.rows(), ("node", "op", "inputs", "runs on"))

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.nodes)} nodes: {' -> '.join(self.ops())})"

    def _repr_html_(self) -> str:
        from ..tables import html_table

        return html_table(self.rows(), ("node", "op", "inputs", "runs on"), title=f"Graph {self.name}")
