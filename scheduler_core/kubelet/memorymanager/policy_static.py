"""The kubelet Memory Manager, static policy: machine state per NUMA node, topology hints and
NUMA allocation of memory and hugepages (ENGINE.md §2.8, §2.5).

Sizes are bytes. Resources are ``memory`` and ``hugepages-<size>``. NUMA masks are ints.

- ``MachineState``: per NUMA node its ``cells`` (the NUMA group it is bound to), ``assignments``
  (memory blocks using it) and per resource a ``MemoryTable`` (total, system_reserved,
  allocatable, reserved, free). Built from a `Topology` and the kubelet's reserved memory.
- ``memory_topology_hints(machine_state, requested, ...)``: GetTopologyHints / GetPodTopologyHints.
- ``calculate_hints``, ``allocate_memory``, ``release_memory``: the policy's steps.
- ``MemoryManager``: a node's policy state (blocks per container, init-container reuse).

The policy's start (default machine state, validateState) is in `start_state`.

Errors in allocation carry the kubelet's own texts (``[memorymanager] ...``) so admission can
report them as upstream does (``UnexpectedAdmissionError``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...errors import InsufficientResourcesError, RequestError
from ...model.bitmask import bits_of, iterate_masks, mask_string
from ...model.node import Allocation
from ...model.pods import GUARANTEED, INIT, SIDECAR, Container, Pod, is_memory_resource, pod_memory_request
from ...model.topology import Topology
from ..topologymanager.hint import TopologyHint
from .state import MEMORY, Block, MachineState, MemoryTable, as_bytes

#: bytes per NUMA node and resource, as an `Allocation` holds memory
MemoryByNUMA = dict[int, dict[str, int]]


class MemoryAllocationError(InsufficientResourcesError):
    """The static policy could not place a container's memory; the text is the kubelet's."""


def _state(machine_state: MachineState | Mapping[Any, Any]) -> MachineState:
    return machine_state if isinstance(machine_state, MachineState) else MachineState.from_dict(machine_state)


def _requested(requested: Mapping[str, int]) -> dict[str, int]:
    out = {}
    for res, amount in requested.items():
        if not isinstance(res, str) or not is_memory_resource(res):
            raise RequestError(f"{res!r} is not a memory resource (memory or hugepages-<size>)")
        out[res] = as_bytes(amount, f"request of {res}")
    return out


# -- hints (ENGINE.md §2.8) ----------------------------------------------------------------------------

def calculate_hints(machine_state: MachineState | Mapping[Any, Any], requested: Mapping[str, int],
                    reusable: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, list[TopologyHint]]:
    """calculateHints: every NUMA mask (IterateBitMasks over the sorted node ids) that can hold the
    request; preferred iff as narrow as the narrowest mask whose *allocatable* memory fits.

    `reusable` maps a mask's kubelet string (e.g. ``"01"``) to memory freed by the pod's init
    containers under exactly that mask. Resources for which no mask fits are absent.
    """
    state = _state(machine_state)
    requested = _requested(requested)
    reusable = reusable or {}
    numa_ids = sorted(state.nodes)
    # Per resource, sums over a mask are built from the mask without its lowest bit, which
    # IterateBitMasks (by size) has always produced before: O(1) per mask and resource.
    alloc_sums = {r: {0: 0} for r in requested}
    free_sums = {r: {0: 0} for r in requested}
    min_affinity = len(numa_ids)
    found: list[int] = []
    for mask in iterate_masks(numa_ids):
        rest = mask & (mask - 1)
        low = (mask ^ rest).bit_length() - 1
        table_of = state.nodes[low].table
        fits = True
        for r, n in requested.items():
            t = table_of(r)
            a = alloc_sums[r][mask] = alloc_sums[r][rest] + t.allocatable
            free_sums[r][mask] = free_sums[r][rest] + t.free
            if a < n:
                fits = False
        if not fits:
            continue
        bits = bits_of(mask)
        min_affinity = min(min_affinity, len(bits))
        if len(bits) == 1:
            if len(state.nodes[bits[0]].cells) > 1:
                continue
        elif any(s.assignments > 0 and (len(s.cells) == 1 or sorted(s.cells) != bits)
                 for s in (state.nodes[b] for b in bits)):
            continue
        extra = reusable.get(mask_string(mask), {}) if reusable else {}
        if any(free_sums[r][mask] + extra.get(r, 0) < n for r, n in requested.items()):
            continue
        found.append(mask)
    if not found:
        return {}
    return {r: [TopologyHint(m, m.bit_count() == min_affinity) for m in found] for r in requested}


def regenerate_hints(blocks: Iterable[Block], requested: Mapping[str, int]) -> dict[str, list[TopologyHint]] | None:
    """Hints from memory a container already holds; None (not []) on any mismatch with the request."""
    blocks = list(blocks)
    hints: dict[str, list[TopologyHint]] = {r: [] for r in requested}
    if len(blocks) != len(requested):
        return None
    for b in blocks:
        if b.type not in requested or b.size != requested[b.type]:
            return None
        mask = 0
        for n in b.numa_affinity:
            mask |= 1 << n
        hints[b.type].append(TopologyHint(mask, True))
    return hints


def _blocks(blocks: Iterable[Block | Mapping[str, Any]] | None) -> list[Block] | None:
    if blocks is None:
        return None
    out = []
    for b in blocks:
        if isinstance(b, Block):
            out.append(b)
        else:
            out.append(Block(tuple(b["numa_affinity"]), b["type"], as_bytes(b["size"], f"size of {b['type']} block")))
    return out


def memory_topology_hints(machine_state: MachineState | Mapping[Any, Any] | None,
                          requested: Mapping[str, int] | None = None, *, pod: Pod | None = None,
                          container: Container | None = None, qos: str | None = None,
                          existing_blocks: Iterable[Block | Mapping[str, Any]] | None = None,
                          reusable: Mapping[str, Mapping[str, int]] | None = None,
                          ) -> dict[str, list[TopologyHint]] | None:
    """The Memory Manager's hints (static policy).

    `requested` (resource -> bytes) defaults to the container's memory requests, or with only a
    `pod` to the pod-level request (`pods.pod_memory_request`, pod scope). Returns None for a
    non-Guaranteed pod (`qos`, else the pod's QoS class) and for `existing_blocks` that do not
    match the request; hints regenerated from `existing_blocks` when they do; otherwise
    `calculate_hints` (which may be {} = no preference when nothing fits).
    """
    qos = qos or (pod.qos_class if pod is not None else GUARANTEED)
    if qos != GUARANTEED:
        return None
    if requested is None:
        if container is not None:
            requested = container.memory_requests()
        elif pod is not None:
            requested = pod_memory_request(pod)
        else:
            raise RequestError("memory_topology_hints needs `requested`, a container or a pod")
    requested = _requested(requested)
    blocks = _blocks(existing_blocks)
    if blocks is not None:
        return regenerate_hints(blocks, requested)
    if machine_state is None:
        raise RequestError("memory_topology_hints needs a machine state when no memory is allocated yet")
    return calculate_hints(machine_state, requested, reusable)


# -- allocation (ENGINE.md §2.8) ------------------------------------------------------------------------------

def best_hint(hints: Iterable[TopologyHint]) -> TopologyHint | None:
    """findBestHint: preferred over not preferred, then the narrowest (first one wins ties)."""
    best: TopologyHint | None = None
    for h in hints:
        if (best is None or (h.preferred and not best.preferred)
                or (h.preferred == best.preferred and _narrower(h.affinity, best.affinity))):
            best = h
    return best


def _narrower(a: int | None, b: int | None) -> bool:
    """Whether mask `a` is narrower than `b` (fewer NUMA nodes, then the lower mask); a nil mask
    ("any NUMA node") is the widest of all, so nil hints compare instead of failing."""
    if a is None or b is None:
        return b is None and a is not None
    ca, cb = a.bit_count(), b.bit_count()
    return a < b if ca == cb else ca < cb


def _leading(hints: Mapping[str, list[TopologyHint]]) -> list[TopologyHint]:
    """The hints the policy looks at: those of `memory` (all resources share the same masks)."""
    if MEMORY in hints:
        return hints[MEMORY]
    return hints[min(hints)] if hints else []


def _violates(state: MachineState, mask: int) -> bool:
    bits = bits_of(mask)
    if len(bits) == 1:
        return False
    return any(s.assignments > 0 and (len(s.cells) == 1 or sorted(s.cells) != bits)
               for s in (state.node(b) for b in bits))


def allocate_memory(machine_state: MachineState, requested: Mapping[str, int], hint: TopologyHint | None = None,
                    reusable: Mapping[str, Mapping[str, int]] | None = None) -> list[Block]:
    """Place `requested` following the Topology Manager's `hint` and update `machine_state`
    in place; returns the container's blocks (one per resource, memory first).

    A nil hint is replaced by the best calculated hint; a hint without enough free memory is
    extended to the best hint that contains it. Memory is carved node by node in ascending NUMA
    order and every node of the mask gets `cells` = the mask's nodes. `reusable` is the memory of
    the pod's init containers keyed by mask string (it is handed on, not carved again).
    """
    requested = _requested(requested)
    reusable = reusable or {}
    mask = _placement(machine_state, requested, hint or TopologyHint(None, False), reusable)
    return _carve(machine_state, requested, mask, reusable)[0]


def _placement(state: MachineState, requested: dict[str, int], hint: TopologyHint,
               reusable: Mapping[str, Mapping[str, int]]) -> int:
    """The NUMA mask the request goes to: the hint's, a default for a nil hint, extended when too small."""
    best = hint
    if best.affinity is None:
        default = best_hint(_leading(calculate_hints(state, requested, reusable)))
        if default is None:
            raise MemoryAllocationError("[memorymanager] failed to get the default NUMA affinity, "
                                        "no NUMA nodes with enough memory is available")
        if not default.preferred and best.preferred:
            raise MemoryAllocationError("[memorymanager] failed to find the default preferred hint")
        best = default
    mask = _mask_of(best)
    for n in bits_of(mask):
        state.node(n)
    if any(state.free(r, mask) < n for r, n in requested.items()):
        inside = [h for h in _leading(calculate_hints(state, requested, reusable)) if _mask_of(h) & mask == mask]
        extended = best_hint(inside)
        if extended is None:
            raise MemoryAllocationError("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
        if not extended.preferred and best.preferred:
            raise MemoryAllocationError("[memorymanager] failed to find the extended preferred hint")
        mask = _mask_of(extended)
    if _violates(state, mask):
        raise MemoryAllocationError("[memorymanager] preferred hint violates NUMA node allocation")
    return mask


def _mask_of(hint: TopologyHint) -> int:
    """The mask of a calculated (or already defaulted) hint, which is never nil."""
    if hint.affinity is None:
        raise RequestError(f"{hint} has no NUMA mask where the memory manager needs one")
    return hint.affinity


def _carve(state: MachineState, requested: dict[str, int], mask: int,
           reusable: Mapping[str, Mapping[str, int]]) -> tuple[list[Block], MemoryByNUMA]:
    """Carve `requested` out of the nodes of `mask` (ascending NUMA ids, memory first), binding
    them to the mask's group; returns the blocks and the bytes taken per node (reused bytes are not)."""
    bits = bits_of(mask)
    key = mask_string(mask)
    blocks = []
    carved: MemoryByNUMA = {}
    for res in sorted(requested, key=lambda r: (r != MEMORY, r)):
        size = requested[res]
        blocks.append(Block(tuple(bits), res, size))
        remaining = max(0, size - reusable.get(key, {}).get(res, 0))
        for n in bits:
            node = state.nodes[n]
            node.assignments += 1
            node.cells = list(bits)
            if remaining == 0:
                continue
            table = node.memory.setdefault(res, MemoryTable())
            if table.free <= 0:
                continue
            step = min(table.free, remaining)
            table.free -= step
            table.reserved += step
            remaining -= step
            carved.setdefault(n, {})[res] = step
    return blocks, in_table_order(state, carved)


def in_table_order(state: MachineState, amounts: Mapping[int, Mapping[str, int]]) -> MemoryByNUMA:
    """`amounts` without zeros, in the machine state's order (NUMA ids, then each node's tables),
    so an allocation lists its memory the same way whichever path built it."""
    out: MemoryByNUMA = {}
    for nid, node in state.nodes.items():
        got = amounts.get(nid)
        if got:
            row = {res: got[res] for res in node.memory if got.get(res)}
            if row:
                out[nid] = row
    return out


def release_memory(machine_state: MachineState, blocks: Iterable[Block]) -> MemoryByNUMA:
    """RemoveContainer: give the blocks' memory back node by node; a node without assignments
    left is unbound (`cells` = itself). Returns the bytes given back per node."""
    state = machine_state
    released: MemoryByNUMA = {}
    for b in blocks:
        remaining = b.size
        for n in b.numa_affinity:
            node = state.node(n)
            node.assignments -= 1
            if node.assignments <= 0:
                node.assignments = 0
                node.cells = [n]
            if remaining == 0:
                continue
            table = node.memory.get(b.type)
            if table is None or table.reserved == 0:
                continue
            step = min(table.reserved, remaining)
            table.reserved -= step
            table.free += step
            remaining -= step
            per_node = released.setdefault(n, {})
            per_node[b.type] = per_node.get(b.type, 0) + step
    return released


# -- per-node state ----------------------------------------------------------------------------------

@dataclass
class MemoryManager:
    """A node's static Memory Manager: machine state, blocks per (pod uid, container) and the
    memory of regular init containers that later containers of the same pod may reuse (ENGINE.md §2.5)."""

    #: what an allocation failure is reported against
    resource: ClassVar[str] = MEMORY

    machine_state: MachineState
    blocks: dict[tuple[str, str], list[Block]] = field(default_factory=dict)
    #: pod uid -> mask string -> resource -> bytes (kept for one pod at a time, like upstream)
    reusable: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)

    @classmethod
    def for_topology(cls, topology: Topology, reserved: Mapping[int, Mapping[str, int]] | None = None) -> MemoryManager:
        return cls(MachineState.from_topology(topology, reserved))

    def get_topology_hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint]] | None:
        return memory_topology_hints(self.machine_state, pod=pod, container=container,
                                     existing_blocks=self.blocks.get((pod.uid, container.name)),
                                     reusable=self.reusable.get(pod.uid))

    def get_pod_topology_hints(self, pod: Pod) -> dict[str, list[TopologyHint]] | None:
        existing = next((self.blocks[(pod.uid, c.name)] for c in pod.all_containers()
                         if (pod.uid, c.name) in self.blocks), None)
        return memory_topology_hints(self.machine_state, pod=pod, existing_blocks=existing)

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint | None = None) -> Allocation:
        """Allocate: nothing for non-Guaranteed pods; a container holding blocks keeps them. Returns
        the memory carved for the container per NUMA node (memory it reuses from the pod's init
        containers was carved for them, so it is not counted again)."""
        if pod.qos_class != GUARANTEED:
            return Allocation(pod.uid, container.name)
        key = (pod.uid, container.name)
        if key in self.blocks:
            self._update_reusable(pod, container, self.blocks[key])
            return Allocation(pod.uid, container.name)
        pod_reuse = self.reusable.get(pod.uid, {})
        requested = _requested(container.memory_requests())
        mask = _placement(self.machine_state, requested, hint or TopologyHint(None, False), pod_reuse)
        blocks, carved = _carve(self.machine_state, requested, mask, pod_reuse)
        self._update_reusable(pod, container, blocks)
        self.blocks[key] = blocks
        self._shrink_init_blocks(pod, container, blocks)
        return Allocation(pod.uid, container.name, memory=carved)

    def _update_reusable(self, pod: Pod, container: Container, blocks: list[Block]) -> None:
        for uid in [u for u in self.reusable if u != pod.uid]:
            del self.reusable[uid]
        if container.kind == INIT:
            per_mask = self.reusable.setdefault(pod.uid, {})
            for b in blocks:
                table = per_mask.setdefault(mask_string(_mask(b.numa_affinity)), {})
                table[b.type] = max(table.get(b.type, 0), b.size)
            return
        per_mask = self.reusable.get(pod.uid, {})
        for b in blocks:
            left = per_mask.get(mask_string(_mask(b.numa_affinity)))
            if left and left.get(b.type):
                left[b.type] = max(0, left[b.type] - b.size)

    def _shrink_init_blocks(self, pod: Pod, container: Container, blocks: list[Block]) -> None:
        """Record that reused init-container memory now belongs to this container, so the pod's
        blocks add up to what it really holds (upstream updateInitContainersMemoryBlocks)."""
        for block in blocks:
            size = block.size
            for init in pod.init_containers:
                if init.name == container.name or size == 0:
                    break
                if init.kind == SIDECAR:
                    continue
                held = self.blocks.get((pod.uid, init.name))
                if not held:
                    continue
                for i, ib in enumerate(held):
                    if ib.size == 0 or ib.type != block.type or ib.numa_affinity != block.numa_affinity:
                        continue
                    used = min(ib.size, size)
                    held[i] = Block(ib.numa_affinity, ib.type, ib.size - used)
                    size -= used

    def remove_container(self, pod_uid: str, container: str) -> MemoryByNUMA:
        """RemoveContainer; returns the bytes given back per NUMA node."""
        blocks = self.blocks.pop((pod_uid, container), None)
        return release_memory(self.machine_state, blocks) if blocks else {}

    def remove_pod(self, pod_uid: str) -> None:
        for uid, name in [k for k in self.blocks if k[0] == pod_uid]:
            self.remove_container(uid, name)
        self.reusable.pop(pod_uid, None)


def _mask(ids: Iterable[int]) -> int:
    mask = 0
    for n in ids:
        mask |= 1 << n
    return mask
