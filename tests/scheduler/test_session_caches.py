"""The session's fast paths change nothing: the kubelet's memos (CPU hints by free CPUs per NUMA node,
merges by the hints' identities, the CPUs `allocate_cpus` picks, the explanation's hint codes and decision
keys), the aligned profile's admissions shared by pods the kubelet reads the same on nodes in the same state, and
its admission on the chosen node taken from its verdict. A session with them decides and explains exactly
what the same session decides when every look-up misses and the kubelet's admission runs on every
chosen node. Random clusters and workloads, every profile, caches cold and warm."""

import dataclasses
import random
from typing import ClassVar

import pytest

from scheduler_core.bench import make_cluster, make_jobs
from scheduler_core.kubelet.admission import admit_pod
from scheduler_core.kubelet.cpumanager import cpu_manager, topology_hints
from scheduler_core.kubelet.cpumanager.topology_hints import cpu_topology_hints
from scheduler_core.kubelet.topologymanager import scope
from scheduler_core.model.bitmask import bits_of, iterate_masks
from scheduler_core.model.node import Node
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler import admissions, explain, profiles, session
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.profiles import PROFILES, AlignedProfile, ProfileSession
from scheduler_core.scheduler.session import run_session

from .test_session_incremental import _gangs

MEMOS = [(topology_hints, "_HINTS"), (scope, "_MERGES"), (cpu_manager, "_CHOSEN"), (explain, "_CODES"),
         (explain, "_MERGE_KEYS"), (explain, "_DECISION_KEYS")]


class Forgetful(dict):
    """A memo that never remembers: every look-up misses, so every answer is computed again."""

    def get(self, key, default=None):
        return default


def _session(seed: int, profile):
    rng = random.Random(seed)
    jobs = make_jobs(rng.randint(60, 120), seed=seed) + _gangs(rng, 4)
    result = run_session(make_cluster(rng.randint(8, 24), seed=seed), jobs, profile=profile)
    data = result.to_dict()
    data.pop("timings")
    return data, result


def _cold():
    for module, name in MEMOS:
        getattr(module, name).clear()


@pytest.mark.parametrize("profile", [*PROFILES, AlignedProfile(distance_tie_break=True)],
                         ids=lambda p: p if isinstance(p, str) else f"{p.name}-{p}")
@pytest.mark.parametrize("seed", [4, 5, 6])
def test_memos_change_no_decision_and_no_explanation(profile, seed, monkeypatch):
    _cold()
    cold, result = _session(seed, profile)
    _session(seed + 100, profile)  # other states in the memos
    warm, _ = _session(seed, profile)
    for module, name in MEMOS:
        monkeypatch.setattr(module, name, Forgetful())
    monkeypatch.setattr(profiles._AlignedSession, "admission", ProfileSession.admission)
    # every profile's session (and aligned's predicate) remembers admissions: here each is run afresh
    monkeypatch.setattr(admissions.Admissions, "admit",
                        lambda self, name, pod, reading: admit_pod(self.cluster.nodes[name], pod, commit=False))
    computed, _ = _session(seed, profile)
    assert cold == computed
    assert warm == computed
    assert result.counts["placed"] > 0


def test_the_memos_are_used_and_stay_bounded(monkeypatch):
    """Without hits the memos would be dead weight: a session asks the same merges, hints and CPU choices
    again and again. A full memo starts over instead of growing."""
    _cold()
    asked, computed = [], []
    real_merged, real_merge = scope.Scope._merged, scope.merge_hints
    monkeypatch.setattr(scope.Scope, "_merged", lambda self, p: asked.append(1) or real_merged(self, p))
    monkeypatch.setattr(scope, "merge_hints", lambda *a: computed.append(1) or real_merge(*a))
    _session(7, "aligned")
    assert scope._MERGES and topology_hints._HINTS and cpu_manager._CHOSEN
    assert 0 < len(computed) < len(asked) / 2  # merges the rejections' fault finding asks included
    monkeypatch.setattr(topology_hints, "_HINTS_LIMIT", 3)
    topology_hints._HINTS.clear()
    topo = synthetic(2, 2, 4, 2)
    for n in range(1, 9):
        cpu_topology_hints(topo, topo.all_cpus, None, n)
    assert len(topology_hints._HINTS) <= 3


def test_cpu_hints_depend_on_the_free_count_per_numa_node_only():
    """Free sets with the same count per NUMA node, capped at the request, share a memo entry; the hints
    are those of a walk over every NUMA mask, whatever the memo held before."""
    topo = synthetic(2, 4, 4, 2)
    topology_hints._HINTS.clear()
    everything = topo.all_cpus
    first = cpu_topology_hints(topo, everything, None, 2)
    assert cpu_topology_hints(topo, everything & ~1, None, 2) == first  # NUMA 0: 7 free, not 8: both ≥ 2
    assert len(topology_hints._HINTS) == 1
    assert cpu_topology_hints(topo, everything & ~(topo.numa_cpus[0] & ~1), None, 2) != first  # NUMA 0: 1 free
    assert len(topology_hints._HINTS) == 2
    rng = random.Random(9)
    cpus = list(range(topo.all_cpus.bit_length()))
    for _ in range(200):
        free = 0
        for cpu in rng.sample(cpus, rng.randint(0, len(cpus))):
            free |= 1 << cpu
        request = rng.randint(1, 40)
        hints = cpu_topology_hints(topo, free, None, request)
        numa_cpus = topo.numa_cpus
        capacity = sorted((m.bit_count() for m in numa_cpus.values()), reverse=True)
        fewest = next((k for k in range(1, len(capacity) + 1) if sum(capacity[:k]) >= request), len(capacity))
        expected = []
        for mask in iterate_masks(numa_cpus):
            region = 0
            for nid in bits_of(mask):
                region |= numa_cpus[nid]
            if (free & region).bit_count() >= request:
                expected.append((mask, mask.bit_count() == fewest))
        assert [(h.affinity, h.preferred) for h in hints] == expected


class _Recording(admissions.Admissions):
    """The session's admissions on the chosen node, each recorded."""

    ran: ClassVar[list[str]] = []

    def admit(self, name, pod, reading):
        self.ran.append(pod.uid)
        return super().admit(name, pod, reading)


def test_aligned_takes_the_admission_from_its_verdict_except_under_the_static_memory_manager(monkeypatch):
    """The static Memory Manager's NUMA groups are not in the aligned profile's state key, so there the
    kubelet's admission runs on the chosen node; elsewhere the verdict is the admission."""
    ran: ClassVar[list[str]] = []
    monkeypatch.setattr(_Recording, "ran", ran)
    monkeypatch.setattr(session, "Admissions", _Recording)
    plain = run_session(make_cluster(12, seed=3), make_jobs(40, seed=3), profile="aligned")
    assert plain.counts["admitted"] > 30 and not ran
    cluster = make_cluster(12, seed=3)
    memory = {"memory_manager_policy": "Static", "reserved_memory": {0: {"memory": 1 << 30}}}
    nodes = [Node(n.name, n.topology, dataclasses.replace(n.kubelet, **memory)) for n in cluster]
    static = run_session(Cluster(nodes), make_jobs(40, seed=3), profile="aligned")
    assert len(ran) == static.counts["placed"] > 30


def _counting(monkeypatch) -> tuple[list[int], list[object]]:
    """Count the admissions asked of `Admissions` and those the kubelet model actually ran."""
    ran: list[int] = []
    asked: list[object] = []
    real_admit, real_shared = admissions.admit_pod, admissions.Admissions.admit
    monkeypatch.setattr(admissions, "admit_pod",
                        lambda node, pod, commit: ran.append(1) or real_admit(node, pod, commit))
    monkeypatch.setattr(admissions.Admissions, "admit", lambda self, *a: asked.append(a) or real_shared(self, *a))
    return ran, asked


def test_aligned_shares_admissions_between_task_policies(monkeypatch):
    """Pods whose tasks differ only in their topology policy read the same to the kubelet: on a node state
    one of them was admitted on, the others reuse that admission."""
    ran, asked = _counting(monkeypatch)
    run_session(make_cluster(12, seed=3), make_jobs(60, seed=3), profile="aligned")
    assert 0 < len(ran) < len(asked) * 0.8


@pytest.mark.parametrize("profile", [p for p in PROFILES if p != "aligned"])
def test_every_profile_shares_the_admission_on_the_chosen_node(profile, monkeypatch):
    """The kubelet's admission on the chosen node is asked once per placed pod; a node state and a pod the
    kubelet reads alike that were admitted before are not admitted again (the memos test above shows
    that this changes no decision)."""
    ran, asked = _counting(monkeypatch)
    result = run_session(make_cluster(300, seed=3), make_jobs(300, seed=3), profile=profile)
    assert len(asked) == result.counts["placed"] > 250
    assert 0 < len(ran) < len(asked)


def test_scaling_reports_every_registered_profile_with_its_ratio_and_target(monkeypatch, capsys):
    from scheduler_core import bench

    monkeypatch.setattr(bench, "SCALING", ((6, 12), (12, 24)))
    assert bench.main(["--scaling", "--profile", "all"]) == 0
    out = capsys.readouterr().out
    for name in PROFILES:
        assert f"{name:8s} large / small: " in out
        assert out.count(f"{name:8s} ") == 3  # both sizes and the ratio
    assert out.count("target ≥ 2,500 pods per CPU second") == len(PROFILES)
