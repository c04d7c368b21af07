"""The engine's part of explaining a kubelet rejection (`scheduler.rejected`): the replayed admission's
sentence names the resource and NUMA nodes, a replay that disagrees says so, and every remedy offered is
one the engine admits (on the other node, after the moves, under the setting), cheapest first."""

from scheduler_core import CPU, Allocation, Container, CPUSet, Device, KubeletConfig, Node, NUMANode, Pod, Topology
from scheduler_core.kubelet.admission import admit_pod
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.rejected import Remedies, as_rejected_on, explain_rejection, with_settings

GiB = 1 << 30
GPU = "gpu-vendor.com/gpu"


def machine() -> Topology:
    """2 NUMA nodes, CPUs 0-3 and 4-7, one GPU on NUMA 1 only."""
    cpus = [CPU(i, i, i // 4, i // 4, i // 4) for i in range(8)]
    return Topology(cpus, [NUMANode(0, 8 * GiB), NUMANode(1, 8 * GiB)], {0: [10, 20], 1: [20, 10]},
                    [Device("gpu0", GPU, (1,))])


def kubelet(policy="single-numa-node", scope="container", **extra) -> KubeletConfig:
    return KubeletConfig(cpu_manager_policy="static", reserved_cpus="0", topology_manager_policy=policy,
                         topology_manager_scope=scope, **extra)


def gpu_pod(cpus=3) -> Pod:
    return Pod("train", (Container.guaranteed("c", cpus * 1000, GiB, devices={GPU: 1}),), namespace="ml")


def busy(name="n1", **settings) -> Node:
    node = Node(name, machine(), kubelet(**settings))
    node.allocate(Allocation("ml/hog", "c", CPUSet.parse("4-5")))
    return node


def test_topology_affinity_names_the_resource_and_numa_nodes():
    e = explain_rejection(busy(), gpu_pod(), "TopologyAffinityError")
    assert e.reproduced and e.resource == f"{GPU} + cpu" and e.numa == 0b11
    assert e.sentence == (f"1 {GPU} is free only on NUMA 1; NUMA 1 has 2 CPUs free, container c wants 3 CPUs; "
                          "cpu fits only on NUMA 0; single-numa-node admits only one NUMA node for all of them "
                          "(container scope)")
    assert e.to_dict()["admission"]["decisions"]  # the hint table's rows


def test_pod_scope_speaks_of_the_pod():
    e = explain_rejection(busy(scope="pod"), gpu_pod(), "TopologyAffinityError")
    assert e.reproduced and "the pod wants 3 CPUs" in e.sentence and "(pod scope)" in e.sentence


def test_no_single_numa_node_has_enough():
    node = Node("n1", machine(), kubelet())
    e = explain_rejection(node, Pod("wide", (Container.guaranteed("c", 5000, GiB),)), "TopologyAffinityError")
    assert e.reproduced and e.resource == "cpu"
    assert e.numa == 0b11 and e.sentence == (
        "container c wants 5 CPUs, which no single NUMA node has free (NUMA 0 has 3 CPUs free, NUMA 1 has 4 CPUs "
        "free); together they fit on NUMA 0 and 1; single-numa-node admits only one NUMA node for all of them "
        "(container scope)")


def test_smt_alignment_is_replayed_under_full_pcpus_only():
    node = Node("n1", synthetic(1, 2, 4, 2), kubelet("best-effort"))
    replayed, note = as_rejected_on(node, "SMTAlignmentError")
    assert replayed.kubelet.cpu_manager_options.full_pcpus_only and "full-pcpus-only" in note
    pod = Pod("odd", (Container.guaranteed("c", 3000, GiB),))
    e = explain_rejection(replayed, pod, "SMTAlignmentError")
    assert e.reproduced and e.resource == "cpu" and "2 threads per core" in e.sentence
    assert "NUMA 0 has 6 free CPUs on whole cores, NUMA 1 has 8" in e.sentence
    assert as_rejected_on(node, "TopologyAffinityError")[0] is node


def test_unexpected_admission_error_names_the_device():
    node = Node("n1", machine(), kubelet("best-effort"))
    pod = Pod("greedy", (Container.guaranteed("c", 1000, GiB, devices={GPU: 2}),))
    e = explain_rejection(node, pod, "UnexpectedAdmissionError")
    assert e.reproduced and e.resource == GPU
    assert e.sentence == f"{GPU}: container c wants 2 {GPU}; NUMA 0 has 0 {GPU} free, NUMA 1 has 1 {GPU} free"


def test_a_replay_that_admits_or_disagrees_is_not_reproduced():
    free = Node("n1", machine(), kubelet())
    e = explain_rejection(free, gpu_pod(), "TopologyAffinityError")
    assert not e.reproduced and e.sentence.startswith("not reproduced: the replay admits this pod on n1 now")
    e = explain_rejection(busy(), gpu_pod(), "UnexpectedAdmissionError")
    assert not e.reproduced and e.sentence.startswith(
        "not reproduced as recorded: the kubelet said UnexpectedAdmissionError, the replay rejects it with "
        "TopologyAffinityError")


def test_remedies_are_checked_and_ranked():
    rejected_on, other = busy("n1"), Node("n2", machine(), kubelet())
    cluster = Cluster([rejected_on, other])
    remedies = Remedies(cluster).find(rejected_on, gpu_pod())
    assert remedies[0].kind == "other-node" and remedies[0].detail["nodes"] == ["n2"]
    assert admit_pod(other, gpu_pod(), commit=False).admitted
    assert [r.rank for r in remedies] == sorted(r.rank for r in remedies)
    settings = [r for r in remedies if r.kind == "setting"]
    assert {r.detail["change"] for r in settings} == {"topologyManagerPolicy: best-effort",
                                                      "topologyManagerPolicy: none"}
    for r in settings:
        changed = with_settings(rejected_on, KubeletConfig.from_dict(r.detail["kubelet"]))
        assert admit_pod(changed, gpu_pod(), commit=False).admitted and r.viable and r.detail["starts"]


def test_a_setting_the_kubelet_would_not_start_with_ranks_last():
    node = Node("n1", machine(), KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node"))
    node.allocate(Allocation("ml/hog", "c", CPUSet.parse("4-5")))  # no reserved CPU: the static policy refuses
    remedies = Remedies(Cluster([node])).find(node, gpu_pod())
    settings = [r for r in remedies if r.kind == "setting"]
    assert settings and all(not r.viable and "would not start" in r.summary for r in settings)
    assert remedies[-len(settings):] == settings  # after the make-room plan (hog moved to other CPUs), a viable one
    assert all(r.viable for r in remedies[:-len(settings)])


def test_make_room_when_no_node_admits_now():
    a, b = Node("a", machine(), kubelet()), Node("b", machine(), kubelet())
    for node in (a, b):  # each: NUMA 0 keeps 1 free CPU, NUMA 1 2 (CPU 0 reserved)
        node.allocate(Allocation(f"ml/{node.name}-x", "c", CPUSet.parse("1-2")))
        node.allocate(Allocation(f"ml/{node.name}-y", "c", CPUSet.parse("4-5")))
    wide = Pod("wide", (Container.guaranteed("c", 3000, GiB),), namespace="ml")
    finder = Remedies(Cluster([a, b]))
    assert finder.other_nodes(wide, "a") is None
    remedies = finder.find(a, wide)
    room = next(r for r in remedies if r.kind == "make-room")
    assert room.cost[0] == len(room.detail["moves"]) == 1
    assert [r.rank for r in remedies] == sorted(r.rank for r in remedies)
    assert {r.detail["change"] for r in remedies if r.kind == "setting"} >= {"topologyManagerPolicy: best-effort"}
    cluster = {n.name: n.copy() for n in (a, b)}
    move = room.detail["moves"][0]
    moved = cluster[move["from_node"]].release(f"{move['namespace']}/{move['pod']}")
    assert moved and admit_pod(cluster[room.detail["node"]], wide).admitted
    assert admit_pod(cluster[move["to_node"]], Pod(move["pod"], (Container.guaranteed("c", move["cpus"] * 1000, 0),),
                                                   namespace=move["namespace"])).admitted


def test_a_pod_no_empty_node_admits_gets_no_make_room_search():
    node = Node("n1", machine(), kubelet())
    huge = Pod("huge", (Container.guaranteed("c", 6000, GiB),))
    finder = Remedies(Cluster([node]))
    assert not finder.fits_empty(huge) and finder.make_room(huge) is None


def test_other_nodes_counts_a_class_and_names_a_few():
    rejected_on = busy("n0")
    empty = [Node(f"e{i}", machine(), kubelet()) for i in range(8)]
    remedy = Remedies(Cluster([rejected_on, *empty])).other_nodes(gpu_pod(), "n0")
    assert remedy is not None and remedy.detail["count"] == 8 and remedy.detail["complete"] is False
    assert remedy.detail["nodes"] == ["e0", "e1", "e2", "e3", "e4"]
    assert remedy.summary == "admitted now on 8 or more other node(s): e0, e1, e2, e3, e4, …"
    assert all(admit_pod(n, gpu_pod(), commit=False).admitted for n in empty)
