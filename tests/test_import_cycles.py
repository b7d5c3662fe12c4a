"""Imports go one way: no module reaches itself through the imports of others.

Every ``import`` statement counts, also one inside a function (a lazy import only postpones a
circle, it does not remove it); the implicit import of a module's parent packages does not.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_files(folder: Path, package: str | None) -> dict:
    """{dotted module name: file} of the .py files under ``folder`` (``package``: its dotted
    name, or None for a folder of scripts that import each other by bare name)."""
    out = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(([package] if package else []) + parts)] = path
    return out


def _targets(node: ast.AST, name: str, is_package: bool, known: dict) -> list:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    subs = [f"{stem}.{alias.name}" for alias in node.names if f"{stem}.{alias.name}" in known]
    return subs if len(subs) == len(node.names) else subs + [stem]  # names, else the module


def import_graph(modules: dict) -> dict:
    """{module: set of modules of ``modules`` it imports}."""
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(t for t in _targets(node, name, is_package, modules) if t in modules)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_checker_finds_a_circle_through_a_lazy_import(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import f\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from pkg import a\nimport pkg.b\n")
    graph = import_graph(module_files(pkg, "pkg"))
    assert graph["pkg.c"] == {"pkg.a", "pkg.b"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


def test_the_library_has_no_import_circle():
    assert cycles(import_graph(module_files(ROOT / "seqprob", "seqprob"))) == []


def test_the_benchmarks_have_no_import_circle():
    assert cycles(import_graph(module_files(ROOT / "benchmarks", None))) == []


def test_the_library_does_not_import_the_application():
    """``seqprob.app`` sits on top: no library module imports it (``__main__`` only runs it)."""
    graph = import_graph(module_files(ROOT / "seqprob", "seqprob"))
    up = sorted(f"{m} -> {t}" for m, targets in graph.items() if not m.startswith("seqprob.app")
                and m != "seqprob.__main__" for t in targets if t.startswith("seqprob.app"))
    assert up == []


def test_the_bottom_layer_imports_only_itself():
    """Layer 0 of the architecture page: these modules import nothing else of seqprob."""
    bottom = {"seqprob.errors", "seqprob.protocols", "seqprob.checks", "seqprob._io", "seqprob._schema",
              "seqprob._parallel", "seqprob._progress", "seqprob._docs", "seqprob.registry", "seqprob.hub"}
    graph = import_graph(module_files(ROOT / "seqprob", "seqprob"))
    outside = {m: sorted(graph[m] - bottom) for m in sorted(bottom) if graph[m] - bottom}
    assert outside == {}
