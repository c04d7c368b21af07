"""The thread grid nests as the hardware does; when neither packages hold whole NUMA nodes nor NUMA nodes whole
packages, packages stay outside and a NUMA node split between them says so, each part counting its own threads."""

import re
from types import SimpleNamespace

from numaweb.pages import grid
from scheduler_core.cpuset import CPUSet
from scheduler_core.topology import Topology
from tests.pages.helpers import parse


def _state(topology: Topology, used: str = "") -> grid.NodeState:
    engine = SimpleNamespace(topology=topology, reserved_cpus=CPUSet(),
                             free_cpus=topology.all_cpus & ~CPUSet.parse(used).mask)
    return grid.NodeState(SimpleNamespace(name="mixed"), engine)


def test_a_numa_node_split_between_packages_is_named_so_and_counts_its_part():
    # package 0: NUMA 0 (CPUs 0-1) and part of NUMA 1 (2-3); package 1: the rest of NUMA 1 (4-5) and NUMA 2 (6-7)
    layout = {0: (0, 0), 1: (0, 0), 2: (0, 1), 3: (0, 1), 4: (1, 1), 5: (1, 1), 6: (1, 2), 7: (1, 2)}
    topology = Topology.from_dict({"cpus": [{"cpu": c, "core": c, "socket": s, "numa": n}
                                            for c, (s, n) in layout.items()]})
    assert grid.layout(topology)[0] == "package"
    html = str(grid.render_grid(_state(topology, used="3,4-5")))
    labels = re.findall(r'<span class="lbl">([^<]+)</span>', html)
    assert labels == ["Package 0 · 3/4 free", "NUMA 0 · 2/2 free", "NUMA 1 (spans packages 0–1) · 1/2 free",
                      "Package 1 · 2/4 free", "NUMA 1 (spans packages 0–1) · 0/2 free", "NUMA 2 · 2/2 free"]
    boxes = [a for t, a in parse(html).elements if t == "div" and "data-cpus" in a]
    assert sum(int(b["data-cpus"]) for b in boxes if "inner" in b["class"]) == 8


def test_numa_nodes_inside_packages_keep_the_usual_nesting():
    topology = Topology.from_dict({"cpus": [{"cpu": c, "core": c, "socket": c // 4, "numa": c // 2}
                                            for c in range(8)]})
    kind, boxes = grid.layout(topology)
    assert kind == "package" and [(s, [n for n, _cores in numas]) for s, numas in boxes] == [(0, [0, 1]), (1, [2, 3])]
    labels = re.findall(r'<span class="lbl">([^<]+)</span>', str(grid.render_grid(_state(topology))))
    assert labels == ["Package 0 · 4/4 free", "NUMA 0 · 2/2 free", "NUMA 1 · 2/2 free",
                      "Package 1 · 4/4 free", "NUMA 2 · 2/2 free", "NUMA 3 · 2/2 free"]
