"""`python -m scheduler_core.formats FILE --dra`: the devices with their NUMA node and its source, the claims."""

from __future__ import annotations

import json

from scheduler_core.formats.__main__ import main

from .objects import GPU_DRIVER, NIC_DRIVER, claim, exactly, gpu_node_slices, pod_with_claims


def test_the_cli_lists_devices_numa_sources_and_claims(tmp_path, capsys) -> None:
    objs = [*gpu_node_slices("n1", [1], [0]),
            claim("c", [exactly("gpu", "gpu.example.com")], results=[("gpu", GPU_DRIVER, "n1", "gpu-0")]),
            pod_with_claims("p", "n1", {"gpu": "c"})]
    path = tmp_path / "dra.json"
    path.write_text(json.dumps({"kind": "List", "items": objs}))
    assert main([str(path), "--dra"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "2 ResourceSlices, 0 DeviceClasses, 1 ResourceClaims, 0 ResourceClaimTemplates"
    assert f"  n1  {GPU_DRIVER}/n1/gpu-0  gpu  NUMA 1 (attribute {GPU_DRIVER}/numaNode)" in out
    assert f"  n1  {NIC_DRIVER}/n1/eth0  nic  NUMA 0 (attribute dra.net/numaNode)" in out
    assert f"  claim ml/c (pod ml/p): gpu={GPU_DRIVER}/n1/gpu-0" in out


def test_bad_dra_objects_exit_2_with_the_field(tmp_path, capsys) -> None:
    path = tmp_path / "dra.json"
    path.write_text(json.dumps({"kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {"pool": {"name": "p"}}}))
    assert main([str(path), "--dra"]) == 2
    assert capsys.readouterr().err.strip() == "error: ResourceSlice s: spec.driver is required"
