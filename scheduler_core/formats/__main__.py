"""`python -m scheduler_core.formats <file> [--format F] [--json]`: the detected format and a
one-screen summary of the machine, or its engine JSON. `--dra`: the DRA objects of a kubectl output instead,
each device with its NUMA node and where that came from, each claim with its devices. Exit code 2 with one
line on bad input."""

from __future__ import annotations

import argparse
import sys

from ..dra.model import DraState
from ..dra.objects import read_dra, read_pod_claims
from ..errors import EngineError
from ..model.cpuset import CPUSet
from ..model.quantity import format_bytes, human_bytes
from . import Loaded, detect_format, dump_topology, load, load_kubelet_config
from .kubelet_config import KubeletFile


def _size(n: int) -> str:
    """Human units first, the exact quantity beside them: `15.7 GiB (16428452Ki)`."""
    return f"{human_bytes(n)} ({format_bytes(n)})" if n else "0"


def summary(loaded: Loaded) -> str:
    t = loaded.topology
    h = t.header
    lines = [f"format: {loaded.format}"]
    if t.description:
        lines.append(f"machine: {t.description}")
    lines.append(f"sockets: {h.num_sockets}  NUMA nodes: {len(t.numa_ids)}  cores: {h.num_cores}  "
                 f"threads: {h.num_cpus} ({t.threads_per_core} per core max)  uncore caches: {h.num_uncore_caches}")
    if t.offline_cpus:
        lines.append(f"offline/unavailable CPUs: {t.offline_cpus}")
    for nid in t.numa_ids:
        node = t.numa_node(nid)
        devs = [d for d in t.devices if d.numa and nid in d.numa]
        by_res: dict[str, int] = {}
        for d in devs:
            by_res[d.resource] = by_res.get(d.resource, 0) + 1
        hp = " ".join(f"{k}={_size(v)}" for k, v in node.hugepages.items() if v)
        dev_text = ", ".join(f"{r}×{n}" for r, n in sorted(by_res.items()))
        cpus = str(CPUSet(t.numa_cpus[nid])) or "(no CPUs)"
        line = f"  NUMA {nid}: sockets {list(t.numa_sockets[nid])} CPUs {cpus}  memory {_size(node.memory)}"
        line += f"  {hp}" if hp else ""
        line += f"  devices: {dev_text}" if dev_text else ""
        lines.append(line)
    no_numa = [d for d in t.devices if not d.numa]
    if no_numa:
        lines.append(f"  devices without NUMA affinity: {len(no_numa)}")
    if t.distances is not None and len(t.numa_ids) <= 24:
        lines.append("distances:")
        lines.append("      " + "".join(f"{n:>4}" for n in t.numa_ids))
        for a in t.numa_ids:
            lines.append(f"  {a:>3}:" + "".join(f"{v:>4}" for v in t.distances[a]))
    if loaded.kubelet is not None:
        k = loaded.kubelet
        lines.append(f"kubelet: topology {k.topology_manager_policy}/{k.topology_manager_scope}, "
                     f"cpu manager {k.cpu_manager_policy}")
    if loaded.allocations:
        lines.append(f"allocations: {len(loaded.allocations)}")
    if loaded.inferred:
        lines.append(f"inferred (not in the file): {', '.join(loaded.inferred)}")
    for note in loaded.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def settings_summary(parsed: KubeletFile) -> str:
    """A KubeletConfiguration as the node settings it gives."""
    k = parsed.config
    reserved = (f"reservedSystemCPUs {k.reserved_cpus}" if k.reserved_cpus
                else f"kube+system reserved CPU {k.reserved_cpu_milli}m")
    lines = ["format: kubelet-config",
             f"CPU Manager: {k.cpu_manager_policy} {k.cpu_manager_options.to_dict() or ''}".rstrip() + f", {reserved}",
             f"Topology Manager: {k.topology_manager_policy}, scope {k.topology_manager_scope} "
             f"{k.topology_manager_options.to_dict() or ''}".rstrip(),
             f"Memory Manager: {k.memory_manager_policy}"]
    for nid, res in sorted(k.reserved_memory.items()):
        lines.append(f"  reserved on NUMA {nid}: " + " ".join(f"{r}={_size(b)}" for r, b in sorted(res.items())))
    if parsed.memory_reservation:
        lines.append("node allocatable reservation: "
                     + " ".join(f"{r}={_size(b)}" for r, b in sorted(parsed.memory_reservation.items())))
    return "\n".join(lines)


def dra_summary(state: DraState) -> str:
    """One line per device (node, driver/pool/name, kind, NUMA node and its source), then one per claim."""
    lines = [f"{len(state.slices)} ResourceSlices, {len(state.classes)} DeviceClasses, {len(state.claims)} "
             f"ResourceClaims, {len(state.templates)} ResourceClaimTemplates"]
    for piece in state.slices:
        where = piece.node or ("all nodes" if piece.all_nodes else "node selector")
        for d in piece.devices:
            numa = "NUMA ?" if d.numa is None else f"NUMA {d.numa}"
            lines.append(f"  {where}  {d.driver}/{d.pool}/{d.name}  {d.kind}  {numa} ({d.numa_source})")
    users = {c: f"{ns}/{pod}" for (ns, pod), claims in state.pod_claims.items() for c in claims}
    for key, claim in sorted(state.claims.items()):
        devices = ", ".join(f"{r.request}={r.driver}/{r.pool}/{r.device}" for r in claim.allocation or ())
        pod = f" (pod {users[key]})" if key in users else ""
        lines.append(f"  claim {key[0]}/{key[1]}{pod}: {devices or 'not allocated'}")
    return "\n".join(lines)


def _dra(source: str) -> str:
    from .snapshot import objects

    items = objects(source, "DRA objects")
    state = read_dra(items)
    for i, obj in enumerate(items):
        if obj.get("kind") == "Pod":
            read_pod_claims(state, obj, f"item {i} (Pod)")
    return dra_summary(state)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler_core.formats", description=__doc__)
    parser.add_argument("file")
    parser.add_argument("--format", default=None)
    parser.add_argument("--json", action="store_true", help="print the engine JSON")
    parser.add_argument("--dra", action="store_true", help="the DRA objects of a kubectl output, devices' NUMA nodes")
    args = parser.parse_args(argv)
    source = args.file if args.file != "-" else sys.stdin.read()
    try:
        if args.dra:
            print(_dra(source))
            return 0
        if (args.format or detect_format(source)) in ("kubelet-config", "kubelet-configuration"):
            print(settings_summary(load_kubelet_config(source)))
            return 0
        loaded = load(source, args.format)
    except EngineError as exc:
        print(f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(dump_topology(loaded.topology, "engine-json") if args.json else summary(loaded), end="\n" if not args.json
          else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
