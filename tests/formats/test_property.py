"""Property tests over the parsers: random and mutated input gives a value or a typed engine error
(EngineError, which the web turns into a 400), never another exception, and never takes long or much
memory (a huge id or count must be refused before anything is sized by it)."""

from __future__ import annotations

import bz2
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_core.errors import EngineError
from scheduler_core.formats import load, load_jobs

DATA = Path(__file__).parent / "data"
SEEDS = {
    "lscpu": DATA / "lscpu/util-linux/lscpu-x86_64-64cpu",
    "lscpu-parse": DATA / "seeds/seed001-lscpu.txt",
    "numactl": DATA / "numactl/hwbench-numa-4domains.txt",
    "hwloc-v1": DATA / "hwloc-xml/v1/16amd64-4distances.v1.xml",
    "hwloc-v2": DATA / "hwloc-xml/v2/16em64t-4s2c2t-offlines.xml",
    "nrt": DATA / "k8s/nrt/scheduler-plugins-worker-node-A.yaml",
    "numatopo": DATA / "k8s/volcano/numatopo-node5-kubectl-excerpt.yaml",
    "cpu-state": DATA / "k8s/kubelet/k8s-test-cpu_manager_state-v2-entries.json",
    "memory-state": DATA / "k8s/kubelet/k8s-test-memory_manager_state-static.json",
}
SYSFS_TAR = DATA / "hwloc-sysfs/16em64t-4s2c2t-offlines.tar.bz2"
MANIFEST = b"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: prop, namespace: default}
spec:
  minAvailable: 2
  priority: 5
  queue: default
  tasks:
  - name: worker
    replicas: 2
    topologyPolicy: single-numa-node
    template:
      metadata: {annotations: {volcano.sh/numa-topology-policy: best-effort}}
      spec:
        initContainers:
        - {name: init, resources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}}
        containers:
        - name: main
          resources:
            requests: {cpu: "4", memory: 8Gi, hugepages-2Mi: 1Gi, nvidia.com/gpu: "1"}
            limits: {cpu: "4", memory: 8Gi, hugepages-2Mi: 1Gi, nvidia.com/gpu: "1"}
"""

#: tokens that have broken parsers: huge, negative and odd numbers, separators, markup, NULs
TOKENS = [b"4000000000", b"4611686018427387904", b"18446744073709551616", b"-1", b"-0", b"1e309", b"nan",
          b"0x" + b"f" * 40, b"99999999999999999999999999999999", b"0-4000000000", b",", b"-", b":", b"\n",
          b"\x00", b"<", b">", b"</object>", b"{", b"}", b"[", b"]", b"&", b"'", b'"', b"*a", b"&a", b"!!python/object",
          b"  ", b"\t", "é".encode(), b"\xff\xfe"]


@st.composite
def mutated(draw, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["insert", "replace", "delete", "flip"]))
        chunk = draw(st.sampled_from(TOKENS) | st.binary(min_size=1, max_size=6))
        if op == "insert":
            data[pos:pos] = chunk
        elif op == "replace":
            data[pos:pos + len(chunk)] = chunk
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 64))]
        elif data:
            data[min(pos, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


def check(call, data: bytes):
    """Value or EngineError, in bounded time and memory."""
    import tracemalloc

    tracemalloc.start()
    start = time.process_time()
    try:
        result = call(data)
    except EngineError:
        result = None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.process_time() - start < 5, "took too long"
    assert peak < 200 * 2**20, f"{peak >> 20} MiB"
    return result


PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_mutated_topology_files(name):
    seed = SEEDS[name].read_bytes()
    assert check(load, seed) is not None  # the unmutated file loads

    @PROPERTY
    @given(data=mutated(seed))
    def run(data):
        check(load, data)

    run()


def test_mutated_sysfs_archives():
    tar = bz2.decompress(SYSFS_TAR.read_bytes())

    @PROPERTY
    @given(data=mutated(tar))
    def run(data):
        check(load, bz2.compress(data, 1))

    run()


@PROPERTY
@given(data=st.binary(max_size=2048) | st.text(max_size=2048).map(str.encode))
def test_random_bytes_as_a_topology(data):
    check(load, data)


def test_mutated_manifests():
    assert len(check(load_jobs, MANIFEST)) == 1

    @PROPERTY
    @given(data=mutated(MANIFEST))
    def run(data):
        check(load_jobs, data)

    run()


_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=12)
_keys = st.sampled_from(["kind", "metadata", "name", "namespace", "spec", "tasks", "replicas", "minAvailable",
                         "priority", "template", "containers", "resources", "requests", "limits", "cpu", "memory",
                         "initContainers", "topologyPolicy", "items", "annotations", "restartPolicy"])
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    _keys | st.text(max_size=8), inner, max_size=6), max_leaves=30)


@PROPERTY
@given(doc=_json)
def test_random_documents_as_manifests(doc):
    import json

    check(load_jobs, json.dumps(doc).encode())


def test_a_million_replicas_is_a_value_not_a_million_pods():
    """The parser keeps replicas as a number; the web's limits refuse it before any pod is built."""
    jobs = check(load_jobs, MANIFEST.replace(b"replicas: 2", b"replicas: 1000000000"))
    assert jobs[0].tasks[0].replicas == 1_000_000_000
    assert jobs[0].first_pod().name == "prop-worker-0"


