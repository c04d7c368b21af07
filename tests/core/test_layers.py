"""The engine's import rule (docs/ARCHITECTURE.md): each package imports only the layers it may, so the
tree keeps saying what depends on what. Every relative import is checked, function-local ones too."""

import ast
from pathlib import Path

import scheduler_core

ROOT = Path(scheduler_core.__file__).parent

#: package -> the packages it may import ("" is the package facade, bench the benchmark entry point)
ALLOWED = {
    "errors": set(),
    "model": {"errors"},
    "formats": {"errors", "model"},
    "kubelet": {"errors", "model", "formats"},
    "volcano": {"errors", "model"},
    "scheduler": {"errors", "model", "kubelet", "volcano"},
    "bench": {"errors", "model", "kubelet", "scheduler"},
    "agent": {"errors", "model", "formats"},
    "": {"errors", "model", "kubelet", "scheduler", "formats"},
}


def _imports() -> list[tuple[str, str]]:
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join(parts)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                out.append((module, ".".join(base + ([node.module] if node.module else []))))
    return out


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_import_follows_the_layers() -> None:
    imports = _imports()
    assert len(imports) > 100  # the walk found the engine's imports
    wrong = [(a, b) for a, b in imports
             if _layer(a) != _layer(b) and _layer(b) not in ALLOWED[_layer(a)]]
    assert wrong == []

