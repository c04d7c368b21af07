"""The import rules (docs/ARCHITECTURE.md) are import-linter contracts in pyproject.toml, which `./dev test` runs with
`lint-imports`. Here a copy of the tree gets one planted violation of each kind, function-local imports included,
and the contracts must fail on each, naming the contract and the planted import."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

#: a planted violation: files of the copy -> code added at their end; the contract it breaks; what its report names
PLANTS = {
    "upward import inside a function": (
        {"scheduler_core/model/cpuset.py":
             "\n\ndef _planted():\n    from ..scheduler import session\n\n    return session\n"},
        "The engine's layers: each imports only the layers below it",
        "scheduler_core.model.cpuset -> scheduler_core.scheduler.session"),
    "an app importing a front end": (
        {"numaweb/worker/heartbeats.py": "\n\nfrom numaweb.api import pagination  # noqa: E402\n"},
        "The front ends (pages, api) import the apps; no app imports a front end",
        "numaweb.worker.heartbeats -> numaweb.api.pagination"),
    "a page view calling the engine": (
        {"numaweb/pages/views/dashboard.py":
             "\n\nfrom scheduler_core.kubelet.admission import admit_pod  # noqa: E402\n"},
        "Only the engine and the feature apps call the engine's formats, kubelet, Volcano",
        "numaweb.pages.views.dashboard -> scheduler_core.kubelet.admission"),
    "a front end importing the engine's facade": (
        {"numaweb/api/pagination.py": "\n\nfrom scheduler_core import session  # noqa: E402\n"},
        "Only the engine and the feature apps import the engine's facade",
        "numaweb.api.pagination -> scheduler_core"),
    "the engine importing Django": (
        {"scheduler_core/errors.py": "\n\ndef _planted():\n    import django\n\n    return django\n"},
        "The engine imports nothing of the web",
        "scheduler_core.errors -> django"),
    "the web importing a private engine module": (
        {"numaweb/jobs/bounds.py": "\n\nfrom scheduler_core.formats._tar import *  # noqa: E402, F403\n"},
        "No module outside its package imports a private engine module",
        "numaweb.jobs.bounds -> scheduler_core.formats._tar"),
    "a cycle held open by an import inside a function": (
        {"numaweb/links.py": "\n\ndef _planted():\n    from numaweb import progress\n\n    return progress\n",
         "numaweb/progress.py": "\n\nfrom numaweb import links  # noqa: E402\n"},
        "No import cycles in the engine or the web",
        "cycles are allowed in numaweb.\nIt could be made acyclic by removing 1 dependency:\n\n- .progress -> .links"),
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the two packages and the contracts, which keeps every contract as it stands."""
    folder = tmp_path_factory.mktemp("tree")
    for package in ("scheduler_core", "numaweb"):
        shutil.copytree(ROOT / package, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", folder)
    clean = _lint(folder)
    assert clean.returncode == 0 and " 0 broken." in clean.stdout, clean.stdout + clean.stderr
    return folder


def _lint(folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(folder), "COLUMNS": "400"}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("plant", list(PLANTS))
def test_a_planted_violation_fails_the_contracts_naming_the_contract(tree, tmp_path, plant):
    files, contract, edge = PLANTS[plant]
    copy = tmp_path / "tree"
    shutil.copytree(tree, copy)
    for path, code in files.items():
        with (copy / path).open("a") as module:
            module.write(code)
    planted = _lint(copy)
    report = planted.stdout
    assert planted.returncode == 1, report + planted.stderr
    assert re.search(re.escape(contract) + r".* BROKEN", report), report
    assert edge in report.split("Broken contracts", 1)[1], report
