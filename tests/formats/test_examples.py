"""The example manifests in examples/ load, and the Koordinator one is read as the koordinator profile reads it."""

from pathlib import Path

import pytest

from scheduler_core.formats import load_jobs
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.node import Node
from scheduler_core.model.topology import synthetic
from scheduler_core.scheduler.cluster import Cluster
from scheduler_core.scheduler.plugin_profiles import KoordinatorProfile
from scheduler_core.scheduler.session import run_session

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GiB = 2**30


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_loads(path):
    jobs = load_jobs(path.read_text())
    assert jobs and all(job.pods() for job in jobs)


def test_the_koordinator_example_binds_spread_cpus_on_one_numa_node():
    [job] = load_jobs((EXAMPLES / "koordinator-job.yaml").read_text())
    node = Node("a", synthetic(1, 2, 4, 2, memory_per_numa=32 * GiB), KubeletConfig(cpu_manager_policy="static"))
    session = KoordinatorProfile().open(Cluster([node]))
    _task, pod = job.pods()[0]
    state = session.prepare(pod)
    assert (state.cpu_bind, state.preferred_bind, state.numa_policy) == (True, "SpreadByPCPUs", "SingleNUMANode")
    result = run_session(Cluster([node]), [job], profile="koordinator")
    assert [p.status for p in result.pods] == ["admitted", "admitted"]
    assert all(p.predicted is not None and p.predicted.numa_mask.bit_count() == 1 for p in result.pods)
