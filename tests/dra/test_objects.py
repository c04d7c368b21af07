"""read_dra and the snapshot's DRA state: devices of two drivers that publish the NUMA node under different
names, the standard attribute first, a pcieRoot matched to the node's topology, claims, templates, pods."""

from __future__ import annotations

import json

import pytest

from scheduler_core.dra.alignment import check
from scheduler_core.dra.model import Constraint, DeviceRequest, DeviceResult
from scheduler_core.dra.objects import read_dra
from scheduler_core.errors import FormatError
from scheduler_core.formats.snapshot import load_snapshot
from scheduler_core.model.topology import CPU, Device, Topology

from .objects import (
    GPU_DRIVER,
    NIC_DRIVER,
    claim,
    device,
    device_class,
    exactly,
    gpu_node_slices,
    numatopology_node,
    pod_with_claims,
    resource_slice,
)


def test_two_drivers_name_the_numa_node_differently_and_the_standard_attribute_comes_first() -> None:
    objs = gpu_node_slices("n1", [0, 1], [1])
    objs.append(resource_slice("n1-std", "accel.example.com", "n1", [
        device("a0", **{"resource.kubernetes.io/numaNode": 1, "numa": 0}), device("a1")]))
    objs.append(resource_slice("n1-cpu", "dra.cpu", "n1", [device("cpu-0", numaNodeID=0)]))
    state = read_dra(objs)
    got = {d.name: (d.numa, d.numa_source, d.kind) for d in state.devices_on("n1")}
    assert got == {
        "gpu-0": (0, f"attribute {GPU_DRIVER}/numaNode", "gpu"),
        "gpu-1": (1, f"attribute {GPU_DRIVER}/numaNode", "gpu"),
        "eth0": (1, "attribute dra.net/numaNode", "nic"),
        "a0": (1, "attribute resource.kubernetes.io/numaNode", "other"),
        "a1": (None, "unknown", "other"),
        "cpu-0": (0, "attribute dra.cpu/numaNodeID", "cpu"),
    }
    gpu = state.devices_on("n1")[0]
    assert gpu.key == (GPU_DRIVER, "n1", "gpu-0")
    assert gpu.attributes[f"{GPU_DRIVER}/model"] == "A100"
    assert state.devices_on("n2") == []


def _pci_topology() -> Topology:
    cpus = [CPU(c, c, c // 2, c // 2) for c in range(4)]
    devices = [Device("0000:3b:00.0", "nvidia.com/gpu", (0,)), Device("0000:3c:00.0", "hwloc/nic", (0,)),
               Device("0000:86:00.0", "nvidia.com/gpu", (1,)), Device("0001:02:00.0", "hwloc/nic", (0, 1))]
    return Topology(cpus, devices=devices)


def test_pcie_root_matched_to_the_pci_devices_of_the_node_topology() -> None:
    root = "resource.kubernetes.io/pcieRoot"
    objs = [resource_slice("s", "gpu.vendor.com", "n1", [
        device("g0", **{root: "pci0000:3a"}), device("g1", **{root: "pci0000:85"}),
        device("g2", **{root: "pci0001:00"}), device("g3", **{root: "not-a-root"}),
        device("g4", **{root: "pci0000:3a", "resource.kubernetes.io/numaNode": 1})])]
    placed = {d.name: (d.numa, d.numa_source) for d in read_dra(objs, {"n1": _pci_topology()}).devices_on("n1")}
    assert placed == {
        "g0": (0, "pcieRoot pci0000:3a matched to the node's topology"),   # buses 3a..84: 3b and 3c, both NUMA 0
        "g1": (1, "pcieRoot pci0000:85 matched to the node's topology"),   # buses 85..: 86 on NUMA 1
        "g2": (None, "unknown"),                                           # a device of two NUMA nodes
        "g3": (None, "unknown"),
        "g4": (1, "attribute resource.kubernetes.io/numaNode"),            # the attribute wins
    }
    # without the node's topology a pcieRoot says nothing
    assert {d.numa for d in read_dra(objs, {"other": _pci_topology()}).devices_on("n1")} == {None, 1}


def test_claims_classes_and_templates_read_with_their_fields() -> None:
    objs = [
        device_class("gpu.example.com", f'device.driver == "{GPU_DRIVER}"'),
        claim("train", [exactly("gpu", "gpu.example.com", 2, 'device.attributes["gpu.example.com"].model == "A100"'),
                        {"name": "nic", "firstAvailable": [
                            {"name": "rdma", "deviceClassName": "nic", "count": 1},
                            {"name": "any", "deviceClassName": "nic", "allocationMode": "All"}]}],
              constraints=[{"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/numaNode"}],
              results=[("gpu", GPU_DRIVER, "n1", "gpu-0"), ("nic/rdma", NIC_DRIVER, "n1", "eth0")],
              reserved_for=["trainer-0"]),
        {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "one-gpu", "namespace": "ml"},
         "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.example.com"}]}}}},
    ]
    state = read_dra(objs)
    assert state.classes["gpu.example.com"].selectors == (f'device.driver == "{GPU_DRIVER}"',)
    train = state.claims[("ml", "train")]
    assert train.requests == (
        DeviceRequest("gpu", "gpu.example.com", ('device.attributes["gpu.example.com"].model == "A100"',),
                      "ExactCount", 2),
        DeviceRequest("nic", "", (), "ExactCount", 1, (DeviceRequest("rdma", "nic", (), "ExactCount", 1),
                                                       DeviceRequest("any", "nic", (), "All", 1))))
    assert train.constraints == (Constraint(("gpu", "nic"), "resource.kubernetes.io/numaNode", None),)
    assert train.allocation == (DeviceResult("gpu", GPU_DRIVER, "n1", "gpu-0"),
                                DeviceResult("nic/rdma", NIC_DRIVER, "n1", "eth0"))
    assert train.reserved_for == ("ml/trainer-0",)
    assert state.templates[("ml", "one-gpu")].requests == (DeviceRequest("gpu", "gpu.example.com"),)
    assert not state.is_empty() and read_dra([]).is_empty()


def test_v1beta1_devices_under_basic_with_capacities() -> None:
    obj = resource_slice("s", GPU_DRIVER, "n1", [])
    obj["apiVersion"] = "resource.k8s.io/v1beta1"
    obj["spec"]["devices"] = [{"name": "gpu-0", "basic": {"attributes": {"numa": {"int": 1}},
                                                          "capacity": {"memory": {"value": "80Gi"}}}}]
    (dev,) = read_dra([obj]).devices_on("n1")
    assert (dev.numa, dev.numa_source, dict(dev.capacity)) == (1, f"attribute {GPU_DRIVER}/numa",
                                                              {"memory": 80 << 30})


@pytest.mark.parametrize(("change", "message"), [
    (lambda o: o["spec"].pop("driver"), "ResourceSlice s: spec.driver is required"),
    (lambda o: o["spec"]["devices"].append({"name": "d0"}), "device 'd0' appears twice"),
    (lambda o: o["spec"]["devices"][0]["attributes"].update(x={"int": "1"}), "attributes[x].int must be a int"),
    (lambda o: o["spec"]["devices"][0]["attributes"].update(x={}), "exactly one of bool, int, string, version, bools"),
    (lambda o: o["spec"]["pool"].update(resourceSliceCount=0), "spec.pool.resourceSliceCount must be an integer"),
    (lambda o: o["spec"].update(devices="d0"), "spec.devices must be a list"),
])
def test_bad_slices_name_the_field(change, message) -> None:
    obj = resource_slice("s", GPU_DRIVER, "n1", [device("d0", numa=0)])
    change(obj)
    with pytest.raises(FormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_dra([obj])


def test_bad_claims_name_the_field() -> None:
    with pytest.raises(FormatError, match=r"ResourceClaim c: spec.devices.requests\[0\].exactly.allocationMode"):
        read_dra([claim("c", [exactly("r", "gpu", 1, mode="Some")])])
    with pytest.raises(FormatError, match=r"requests\[0\].exactly.count must be an integer of at least 1"):
        read_dra([claim("c", [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 0}}])])


def _snapshot(tmp_path, objs: list[dict]):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    return load_snapshot(path)


def test_a_snapshot_reads_the_dra_objects_and_the_pods_claims(tmp_path) -> None:
    objs = [*numatopology_node("n1"), *gpu_node_slices("n1", [0, 1], [0]),
            claim("shared", [exactly("gpu", "gpu.example.com")], results=[("gpu", GPU_DRIVER, "n1", "gpu-1")]),
            claim("trainer-0-nic-x7", [exactly("nic", "nic")], results=[("nic", NIC_DRIVER, "n1", "eth0")]),
            pod_with_claims("trainer-0", "n1", {"gpu": "shared"}, templates={"nic": "one-nic"},
                            generated={"nic": "trainer-0-nic-x7"}),
            pod_with_claims("waiting", "n1", {}, templates={"nic": "one-nic"})]
    snap = _snapshot(tmp_path, objs)
    dra = snap.dra
    assert dra.pod_claims == {("ml", "trainer-0"): (("ml", "shared"), ("ml", "trainer-0-nic-x7"))}
    assert dra.claims[("ml", "trainer-0-nic-x7")].template == "one-nic"
    assert [(d.name, d.numa) for d in dra.devices_of("ml", "trainer-0")] == [("gpu-1", 1), ("eth0", 0)]
    assert dra.devices_of("ml", "waiting") == []
    assert dra.pod_templates == {("ml", "waiting"): (("nic", "one-nic"),)}
    assert not any("ResourceSlice" in n for n in snap.notes)
    # the GPU on NUMA 1 and the NIC on NUMA 0, CPUs pinned on NUMA 0: both kinds found, none invented
    result = check(dra.devices_of("ml", "trainer-0"), frozenset({0}), frozenset({0}))
    assert result.to_dict() == {"aligned": False, "kinds": ["gpu-cpu", "gpu-memory", "nic-gpu"]}


def test_a_snapshot_without_dra_objects_has_an_empty_state(tmp_path) -> None:
    assert _snapshot(tmp_path, numatopology_node("n1")).dra.is_empty()


def test_a_bad_dra_object_in_a_snapshot_is_a_format_error(tmp_path) -> None:
    bad = resource_slice("s", GPU_DRIVER, "n1", [{"name": ""}])
    with pytest.raises(FormatError, match=r"snapshot: ResourceSlice s: spec.devices\[0\].name is required"):
        _snapshot(tmp_path, [*numatopology_node("n1"), bad])


def test_every_misalignment_of_a_snapshot_is_found_and_none_invented(tmp_path) -> None:
    """Pods with allocated claims on nodes whose GPU driver and DraNet name NUMA differently; their CPUs pinned by
    the kubelet's admission replayed in order. The expected kinds come from the objects' own fields: each
    result's device, its NUMA value in the slice JSON under its driver's name, against the pinned CPUs."""
    from scheduler_core import admit_pod
    from scheduler_core.dra.alignment import pinned_numa
    from scheduler_core.model.node import Node

    slices = gpu_node_slices("n1", [0, 1], [0, 1])
    pods_claims = {"a": ("gpu-0", "eth0"), "b": ("gpu-1", "eth0"), "c": ("gpu-1", "eth1"), "d": ("gpu-0", None)}
    objs = [*numatopology_node("n1", cpus_per_numa=4), *slices]
    for i, (pod, (gpu, nic)) in enumerate(pods_claims.items()):
        results = [("gpu", GPU_DRIVER, "n1", gpu)] + ([("nic", NIC_DRIVER, "n1", nic)] if nic else [])
        objs.append(claim(f"{pod}-devices", [exactly("gpu", "gpu.example.com")], results=results))
        p = pod_with_claims(pod, "n1", {"devices": f"{pod}-devices"}, cpus=2)
        p["metadata"]["creationTimestamp"] = f"2026-11-20T10:00:0{i}Z"
        objs.append(p)
    snap = _snapshot(tmp_path, objs)
    sn = snap.nodes["n1"]
    node = Node("n1", sn.topology, sn.kubelet)
    numa_in_json = {(s["spec"]["driver"], d["name"]): d["attributes"]["numaNode"]["int"]
                    for s in slices for d in s["spec"]["devices"]}
    found, expected = {}, {}
    for running in snap.running_on("n1"):
        admitted = admit_pod(node, running.pod, commit=True)
        assert admitted.admitted
        cpus, memory = pinned_numa(admitted.allocations, node.topology)
        found[running.name] = check(snap.dra.devices_of("ml", running.name), cpus, memory).kinds
        gpu, nic = pods_claims[running.name]
        gpu_numa = numa_in_json[(GPU_DRIVER, gpu)]
        kinds = {"gpu-cpu"} if gpu_numa not in cpus else set()
        if nic is not None:
            nic_numa = numa_in_json[(NIC_DRIVER, nic)]
            kinds |= {"nic-cpu"} if nic_numa not in cpus else set()
            kinds |= {"nic-gpu"} if nic_numa != gpu_numa else set()
        expected[running.name] = tuple(sorted(kinds))
    assert found == expected
    assert any(found.values()) and not all(found.values())  # some misaligned, some not: the test can fail both ways
