"""The package's shape: the layout picture in the docs matches the tree, and packages import
each other in one direction only (issue 12)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cxreval"
PICTURE = Path(__file__).resolve().parents[1] / "docs" / "scoring.md"
NOT_DRAWN = {"py.typed", "__init__.py", "__main__.py", "_version.py", "examples", "__pycache__"}

#: Package cycles still to be untangled (issue 12). This list may only shrink; it is empty:
#: ontology <- extract <- judge <- scores <- engines <- evaluate, and llm/ (infrastructure) is
#: imported by the engines in extract/ and judge/ and imports none of them.
KNOWN_CYCLES: list[set[str]] = []


def test_layout_picture_names_every_module_and_nothing_else() -> None:
    text = PICTURE.read_text(encoding="utf-8")
    block = text.split("```\n", 2)[1]
    drawn = {m.group(1) for m in re.finditer(r"(?m)^([a-z_]+(?:/|\.py|\.yaml))\s", block)}
    drawn |= {m.group(1) for m in re.finditer(r";\s+([a-z_]+\.py)\s", block)}
    tree = {(p.name + "/") if p.is_dir() else p.name for p in SRC.iterdir() if p.name not in NOT_DRAWN}
    assert drawn == tree, f"picture only: {sorted(drawn - tree)}; tree only: {sorted(tree - drawn)}"


def _unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _import_graph() -> dict[str, set[str]]:
    """Package-level edges from runtime imports (``if TYPE_CHECKING:`` blocks do not count)."""
    edges: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        module = ".".join(parts).removesuffix(".__init__")
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    targets = [".".join([*base, *([node.module] if node.module else [])])]
                elif node.module:
                    targets = [node.module]
            for t in targets:
                if t.startswith("cxreval.") and _unit(t) != _unit(module) and _unit(t) != "cxreval._version":
                    edges.setdefault(_unit(module), set()).add(_unit(t))
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def test_no_new_import_cycles_between_packages() -> None:
    cycles = _cycles(_import_graph())
    for cycle in cycles:
        assert any(cycle <= known for known in KNOWN_CYCLES), f"new import cycle between packages: {sorted(cycle)}"


def test_testing_package_is_not_imported_by_runtime_code() -> None:
    edges = _import_graph()
    users = sorted(src for src, dst in edges.items() if "cxreval.testing" in dst and src != "cxreval.testing")
    assert users == []


def test_llm_is_infrastructure_that_knows_no_engine() -> None:
    """``llm/`` (backends, runner, answer store, prompts, generic answer parsing) is imported by
    the engines in ``extract/`` and ``judge/`` and imports none of them, nor what is built on them
    (``cxreval.literals``, the shared names, ``cxreval.caches``, the one bounded cache, and
    ``cxreval.sqlite_store``, the one way to open a store, import nothing of cxreval)."""
    graph = _import_graph()
    imported = graph.get("cxreval.llm", set())
    leaves = {"cxreval.literals", "cxreval.caches", "cxreval.sqlite_store"}
    assert imported <= {"cxreval.ontology", *leaves}, sorted(imported)
    assert not any(graph.get(leaf) for leaf in leaves)
