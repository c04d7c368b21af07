"""Shared fixtures: the conformance data folder (copied from shared/conformance)."""

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "conformance" / "data"


def load_vectors(name: str) -> dict:
    """A conformance file by stem, e.g. `load_vectors("kubelet_merge")`."""
    return json.loads((DATA / f"{name}.json").read_text())


@pytest.fixture(scope="session")
def vectors():
    return load_vectors
