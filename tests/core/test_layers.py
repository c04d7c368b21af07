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
    "kubelet": {"errors", "model"},
    "volcano": {"errors", "model"},
    "scheduler": {"errors", "model", "kubelet", "volcano"},
    "formats": {"errors", "model"},
    "bench": {"errors", "model", "kubelet", "scheduler"},
    "": {"errors", "model", "kubelet", "scheduler", "formats"},
}
#: known exceptions, each to be removed (docs/ARCHITECTURE.md names them)
EXCEPTIONS = {
    ("scheduler_core.model.node", "scheduler_core.kubelet.cpumanager.policy_static"),
    ("scheduler_core.kubelet.state_check", "scheduler_core.formats.kubelet_state"),
    # the checkpoint files, read and written in formats/ (see docs/ARCHITECTURE.md)
    ("scheduler_core.kubelet.kubelet_start", "scheduler_core.formats.kubelet_state"),
    ("scheduler_core.formats.kubelet_state", "scheduler_core.kubelet.memorymanager.state"),
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
             if _layer(a) != _layer(b) and _layer(b) not in ALLOWED[_layer(a)] and (a, b) not in EXCEPTIONS]
    assert wrong == []


def test_the_exceptions_still_exist() -> None:
    """An exception that was fixed leaves the list (so the list never hides a new one)."""
    assert set(_imports()) >= EXCEPTIONS
