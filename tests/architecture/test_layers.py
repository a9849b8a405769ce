"""Every layer of ``npusim`` imports only itself and the layers below it, and no module imports itself back.

The layer order is written here, once, from the bottom up; the README's architecture section shows the same
table (``test_readme_lists_the_layers`` keeps the two in step). The scan is static: every ``import`` and
``from ... import`` statement of every module, including those inside functions and ``if TYPE_CHECKING:``
(function-local imports are how an upward import hides). Imports through ``importlib`` are not seen.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.architecture

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "npusim"

#: Bottom to top: (layer, what it is, its modules and sub-packages). ``npusim`` is the package's
#: ``__init__`` (the public API of the core).
LAYERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("foundation", "names, numbers and formats; no simulation",
     ("errors", "dtypes", "numerics", "formats", "params", "pipes", "config", "tables", "wrap", "tracebacks",
      "chartstyle", "memo")),
    ("core", "the simulated AI core and its instruction set",
     ("costs", "sanitizer", "initcheck", "tensor", "memory", "allocator", "instructions", "cores", "core", "chipsync",
      "l2", "memsys", "interleave", "progress", "launch", "profile", "npusim")),
    ("kernels", "reference kernels written in the programming model; precision analysis",
     ("precision", "kernels", "conv", "highlevel")),
    ("ops", "operators around the kernels", ("ops",)),
    ("views", "charts, traces, the explorer widget", ("views",)),
    ("frameworks", "PyTorch ops and whole models", ("torch", "model")),
    ("course", "lab checks and course tooling", ("checks", "course")),
    ("tools", "the command line and its benchmark", ("bench", "cli")),
)


# --- the scan --------------------------------------------------------------------------------------------

def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under ``package`` (a package is its ``__init__.py``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _targets(name: str, path: Path, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> list[str]:
    """The package modules one import statement loads (the deepest known module of each name)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = []
    for n in names:
        while n and n not in known:
            n = n.rpartition(".")[0]
        if n:
            out.append(n)
    return out


def import_graph(package: Path) -> dict[str, dict[str, int]]:
    """module -> {imported module of the same package: line of the first such import}."""
    known = modules(package)
    graph: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        edges = graph.setdefault(name, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(name, path, node, known):
                    if target != name:
                        edges[target] = min(edges.get(target, node.lineno), node.lineno)
    return graph


def layer_of(module: str, layers=LAYERS) -> int | None:
    """Index into ``layers`` of a dotted module name (by its first part below the package)."""
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else parts[0]
    for i, (_, _, members) in enumerate(layers):
        if key in members:
            return i
    return None


def upward_imports(graph, package: Path, layers=LAYERS) -> list[str]:
    """One message per import of a module in a higher layer: file:line, both modules, both layers."""
    files = modules(package)
    out = []
    for src, edges in sorted(graph.items()):
        for dst, line in sorted(edges.items()):
            a, b = layer_of(src, layers), layer_of(dst, layers)
            if a is not None and b is not None and b > a:
                where = files[src].relative_to(package.parent)
                out.append(f"{where}:{line}: layer {layers[a][0]!r} ({src}) imports {dst} of layer "
                           f"{layers[b][0]!r} above it")
    return out


def find_cycle(graph) -> list[str] | None:
    """A list of modules ``[m0, m1, ..., m0]`` in which each imports the next, or None."""
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, {})):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def describe_cycle(cycle: list[str], graph, package: Path) -> str:
    files = modules(package)
    return "\n".join(f"  {files[a].relative_to(package.parent)}:{graph[a][b]}: {a} imports {b}"
                     for a, b in zip(cycle, cycle[1:]))


def layer_listing(layers=LAYERS) -> str:
    return "\n".join(f"  {i}. {name:<11} {', '.join(members)}" for i, (name, _, members) in enumerate(layers))


# --- the package's rule ----------------------------------------------------------------------------------

def test_every_layer_imports_only_the_layers_below_it():
    print(f"layers of npusim, bottom to top:\n{layer_listing()}")
    bad = upward_imports(import_graph(PACKAGE), PACKAGE)
    assert not bad, ("imports that point up the layers (move the code down, or the import up):\n"
                     + "\n".join(bad) + f"\nlayers, bottom to top:\n{layer_listing()}")


def test_every_module_belongs_to_a_layer():
    lost = [m for m in modules(PACKAGE) if layer_of(m) is None]
    assert not lost, f"modules in no layer (add them to LAYERS in {Path(__file__).name}): {lost}"


def test_no_module_imports_itself_back():
    graph = import_graph(PACKAGE)
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle {' -> '.join(cycle)}:\n{describe_cycle(cycle, graph, PACKAGE)}"


def test_readme_lists_the_layers():
    """The README's layer table has one row per layer, bottom to top, with the same members."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d) (\w+) \| ([^|]*) \|", text, flags=re.M)
    found = [(name, tuple(re.findall(r"`(?:npusim\.)?([\w]+)`", members))) for _, name, members in rows]
    assert found == [(name, members) for name, _, members in LAYERS], found


# --- the checker itself ----------------------------------------------------------------------------------

def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, src in files.items():
        p = tmp_path / "npusim" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(src)
    return tmp_path / "npusim"


def test_checker_reports_a_function_local_upward_import_with_file_and_line(tmp_path):
    pkg = _package(tmp_path, {
        "__init__.py": "from .config import a2\n",
        "config.py": "def _repr_html_():\n    from .views.html import table\n    return table()\n",
        "views/__init__.py": "",
        "views/html.py": "import npusim\n",
    })
    graph = import_graph(pkg)
    assert graph["npusim.config"] == {"npusim.views.html": 2}
    assert upward_imports(graph, pkg) == [
        "npusim/config.py:2: layer 'foundation' (npusim.config) imports npusim.views.html of layer 'views' "
        "above it"]


def test_checker_finds_a_cycle_within_one_layer(tmp_path):
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "conv/__init__.py": "",
        "conv/api.py": "from .fusion import chain\n",
        "conv/fusion.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .api import ConvResult\n",
        "conv/tiling.py": "from . import api\nfrom .. import conv\n",
    })
    graph = import_graph(pkg)
    assert graph["npusim.conv.tiling"] == {"npusim.conv.api": 1, "npusim.conv": 2}
    assert not upward_imports(graph, pkg)
    cycle = find_cycle(graph)
    assert cycle == ["npusim.conv.api", "npusim.conv.fusion", "npusim.conv.api"]
    assert describe_cycle(cycle, graph, pkg) == ("  npusim/conv/api.py:1: npusim.conv.api imports npusim.conv.fusion\n"
                                                 "  npusim/conv/fusion.py:3: npusim.conv.fusion imports npusim.conv.api")
