"""Which ResourceSlices a node can use, gathered into pools as upstream's GatherPools does
(k8s.io/dynamic-resource-allocation/structured): a slice local to the node, or for all nodes, or whose node
selector picks the node; of a pool only the slices of its newest generation; a pool is incomplete when it has
fewer slices than `resourceSliceCount`, invalid when a device name repeats. Upstream keeps pools in a Go map
(random order); here they keep the order their first slice has in the input, so results are reproducible."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .model import ResourceSlice


@dataclass
class Pool:
    driver: str
    name: str
    slices: list[ResourceSlice] = field(default_factory=list)
    incomplete: bool = False
    invalid: bool = False

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.name}"


def _requirement(key: str, operator: str, values: tuple[str, ...], node: str, labels: Mapping[str, str]) -> bool:
    value = node if key == "metadata.name" else labels.get(key)
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    try:  # Gt, Lt: the label's integer against the one value
        number, bound = int(value or ""), int(values[0])
    except (ValueError, IndexError):
        return False
    return number > bound if operator == "Gt" else number < bound


def node_matches(piece: ResourceSlice, node: str, labels: Mapping[str, str]) -> bool:
    """Does the slice serve `node`: its node name, all nodes, or a selector term all of whose requirements
    the node meets."""
    if piece.node:
        return piece.node == node
    if piece.all_nodes:
        return True
    if piece.node_selector is not None:
        return any(all(_requirement(k, op, vals, node, labels) for k, op, vals in term) for term in piece.node_selector)
    return False


def gather_pools(slices: Sequence[ResourceSlice], node: str, labels: Mapping[str, str]) -> list[Pool]:
    """The pools of the slices (given in input order) that serve `node`."""
    pools: dict[tuple[str, str], Pool] = {}
    for piece in slices:
        if not node_matches(piece, node, labels):
            continue
        pool = pools.get((piece.driver, piece.pool))
        if pool is None:
            pools[(piece.driver, piece.pool)] = Pool(piece.driver, piece.pool, [piece])
        elif piece.generation > pool.slices[0].generation:
            pool.slices = [piece]
        elif piece.generation == pool.slices[0].generation:
            pool.slices.append(piece)
    for pool in pools.values():
        pool.incomplete = len(pool.slices) != pool.slices[0].count
        names = [d.name for s in pool.slices for d in s.devices]
        pool.invalid = len(names) != len(set(names))
    return list(pools.values())
