"""KubeletConfiguration (/var/lib/kubelet/config.yaml) as a format: detected, read into node settings,
written back (round trip), and refused field by field."""

import dataclasses

import pytest

from scheduler_core.errors import FormatError
from scheduler_core.formats import detect_format, dump_kubelet_config, load, load_kubelet_config
from scheduler_core.formats.__main__ import main
from scheduler_core.kubelet.kubelet_start import kubelet_start
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.topology import synthetic

CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
cgroupDriver: systemd
clusterDNS: [10.96.0.10]
cpuManagerPolicy: static
cpuManagerPolicyOptions:
  full-pcpus-only: "true"
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
memoryManagerPolicy: Static
kubeReserved:
  cpu: 500m
  memory: 512Mi
systemReserved:
  cpu: "1"
  memory: 412Mi
reservedMemory:
  - numaNode: 0
    limits:
      memory: 1Gi
"""


def test_detected_and_read_as_node_settings():
    assert detect_format(CONFIG) == "kubelet-config"
    parsed = load_kubelet_config(CONFIG)
    k = parsed.config
    assert (k.cpu_manager_policy, k.topology_manager_policy, k.topology_manager_scope, k.memory_manager_policy) == \
        ("static", "single-numa-node", "pod", "Static")
    assert k.cpu_manager_options.full_pcpus_only
    assert k.reserved_cpus is None and k.reserved_cpu_milli == 1500  # the static policy reserves ceil(1.5) = 2
    assert k.reserved_memory == {0: {"memory": 1 << 30}}
    assert parsed.memory_reservation == {"memory": (512 + 412 + 100) << 20}  # + evictionHard's default 100Mi


def test_defaults_are_the_kubelets():
    k = load_kubelet_config("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n").config
    assert k == KubeletConfig(cpu_manager_policy="none", topology_manager_policy="none")


def test_round_trip_alone_and_into_the_original_file():
    parsed = load_kubelet_config(CONFIG)
    assert load_kubelet_config(dump_kubelet_config(parsed.config)).config == parsed.config
    changed = dataclasses.replace(parsed.config, reserved_cpu_milli=3000, topology_manager_policy="restricted",
                                  reserved_memory={0: {"memory": 512 << 20}, 1: {"memory": 512 << 20}})
    text = dump_kubelet_config(changed, parsed.document)
    again = load_kubelet_config(text)
    assert again.config == changed
    assert again.document["cgroupDriver"] == "systemd" and again.document["clusterDNS"] == ["10.96.0.10"]
    assert again.document["kubeReserved"]["cpu"] == "500m"  # kept; the difference goes to systemReserved
    listed = dataclasses.replace(parsed.config, reserved_cpus="0,8")
    assert "reservedSystemCPUs: 0,8" in dump_kubelet_config(listed)
    assert load_kubelet_config(dump_kubelet_config(listed)).config == listed


@pytest.mark.parametrize(("edit", "field", "needle"), [
    ("cpuManagerPolcy: static\n", "cpuManagerPolcy", 'unknown field "cpuManagerPolcy"'),
    ("topologyManagerPolicy: strict\n", "topologyManagerPolicy",
     'topologyManagerPolicy (--topology-manager-policy) "strict" must be one of'),
    ("topologyManagerScope: node\n", "topologyManagerScope", '"node" must be one of: "container", or "pod"'),
    ("cpuManagerPolicy: dynamic\n", "cpuManagerPolicy", 'unknown policy: "dynamic"'),
    ("cpuManagerPolicyOptions: {turbo: 'true'}\n", "cpuManagerPolicyOptions",
     'unknown CPU Manager Policy option: "turbo"'),
    ("reservedSystemCPUs: 3-1\n", "reservedSystemCPUs", "reservedSystemCPUs"),
    ("kubeReserved: {cpu: lots}\n", "kubeReserved", "kubeReserved.cpu"),
    ("reservedMemory: [{numaNode: 0, limits: {cpu: 1}}]\n", "reservedMemory", "cpu is not a memory type"),
    ("reservedMemory: [{numaNode: 0, limits: {memory: 0}}]\n", "reservedMemory", "may not be zero"),
    ("topologyManagerPolicy: [a]\n", "topologyManagerPolicy", "must be a string"),
])
def test_bad_fields_are_named(edit, field, needle):
    text = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + edit
    with pytest.raises(FormatError) as exc:
        load_kubelet_config(text)
    assert needle in str(exc.value) and exc.value.field == field


def test_not_a_topology():
    with pytest.raises(FormatError, match="settings, not its topology"):
        load(CONFIG)


def test_command_line_summary(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "format: kubelet-config" in out and "Topology Manager: single-numa-node, scope pod" in out
    path.write_text(CONFIG + "bogus: 1\n")
    assert main([str(path)]) == 2
    assert 'unknown field "bogus"' in capsys.readouterr().err


def test_reserved_memory_must_add_up_to_node_allocatable():
    topology = synthetic(1, 2, 4, 2, memory_per_numa=16 << 30)
    parsed = load_kubelet_config(CONFIG)  # 512Mi + 412Mi + the default 100Mi eviction = 1Gi reserved on NUMA 0
    assert kubelet_start(topology, parsed.config, memory_reservation=parsed.memory_reservation).starts
    raised = load_kubelet_config(CONFIG + "evictionHard: {memory.available: 200Mi}\n")
    verdict = kubelet_start(topology, raised.config, memory_reservation=raised.memory_reservation)
    assert verdict.refusal.message == ('the total amount "1Gi" of type "memory" is not equal to the value "1124Mi" '
                                       'determined by Node Allocatable feature')
    assert verdict.refusal.file is None and verdict.refusal.manager == "Memory Manager"
