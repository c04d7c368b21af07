"""No import circles among the project's own modules (migrations and tests left out). Imports inside functions
count like any other: a function-local import only hides a circle from Python at start-up, not from a reader."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
def modules(package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT)
        if {"migrations", "tests", "__pycache__"} & set(rel.parts):
            continue
        name = ".".join(rel.with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imported(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted names an import statement may bind (a `from x import y` may import module x.y)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(max(node.level - 1, 0)):
        base = base.rpartition(".")[0]
    head = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
    return [head, *(f"{head}.{a.name}" for a in node.names)]


def graph(found: dict[str, Path]) -> tuple[dict[str, set[str]], int]:
    """Edges module → project module it imports (at any depth), and how many of them sit inside a function."""
    edges: dict[str, set[str]] = {m: set() for m in found}
    local = 0
    for module, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        inside = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                  for n in ast.walk(f) if n is not f}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in imported(module, path, node):
                while name and name not in found:
                    name = name.rpartition(".")[0]
                if name and name != module and not module.startswith(name + "."):
                    edges[module].add(name)
                    local += id(node) in inside
    return edges, local


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return sorted(out)


def test_the_checker_finds_a_circle_held_open_by_a_function_local_import(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from .a import x\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path)
    edges, local = graph(modules("pkg"))
    assert cycles(edges) == [["pkg.a", "pkg.b"]] and local == 1


def test_no_import_circles_in_the_web_project_and_only_the_known_one_in_the_engine():
    found = {**modules("numaweb"), **modules("scheduler_core")}
    edges, local = graph(found)
    groups = cycles(edges)
    assert local > 0  # function-local imports were read (and counted as edges)
    assert groups == []  # none in the web, none in the engine
