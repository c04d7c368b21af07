"""The node agent's DaemonSet (deploy/kubernetes/agent) validates against the Kubernetes API schemas like the other
manifests, runs on every node with the host's paths read-only and its token from a Secret, and passes the agent
only flags it has."""

from __future__ import annotations

import re
from pathlib import Path

import kubernetes_validate
import pytest

from scheduler_core.agent.__main__ import parse
from tests.deploy import kustomize
from tests.web.test_kubernetes import VERSION, by_kind

AGENT = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "agent"


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    return kustomize(AGENT)


def test_every_document_validates_against_the_api_schema(rendered):
    assert sorted(d["kind"] for d in rendered) == ["ConfigMap", "DaemonSet", "Namespace", "Secret"]
    for doc in rendered:
        kubernetes_validate.validate(doc, VERSION, strict=True)
    broken = by_kind(rendered, "DaemonSet")["numaweb-agent"]
    broken = {**broken, "spec": {**broken["spec"], "updateStrategy": {"rollingUpdate": "10%"}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)


def test_the_agent_reads_the_host_read_only_with_least_privilege(rendered):
    pod = by_kind(rendered, "DaemonSet")["numaweb-agent"]["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"operator": "Exists"}]  # every node, tainted ones too
    assert pod["automountServiceAccountToken"] is False
    assert not pod.get("hostNetwork") and not pod.get("hostPID")
    (container,) = pod["containers"]
    assert container["image"] == "registry.example.com/numaweb:0.1.0"
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
    assert container["resources"]["limits"]["memory"]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]} and not security.get("privileged")
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert host_paths == {"sys": "/sys", "proc": "/proc", "kubelet": "/var/lib/kubelet"}
    assert all(m["readOnly"] is True for m in container["volumeMounts"])
    env = {e["name"]: e["valueFrom"] for e in container["env"]}
    assert env["NUMAWEB_AGENT_TOKEN"] == {"secretKeyRef": {"name": "numaweb-agent", "key": "token"}}
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert by_kind(rendered, "Secret")["numaweb-agent"]["stringData"]["token"]


def test_the_command_is_one_the_agent_accepts(rendered, monkeypatch, tmp_path):
    pod = by_kind(rendered, "DaemonSet")["numaweb-agent"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["numaweb-agent"]
    config = by_kind(rendered, "ConfigMap")["numaweb-agent"]["data"]
    values = {"NODE_NAME": "node-1", "NUMAWEB_SERVER": config["server"], "NUMAWEB_CLUSTER": config["cluster"],
              "NUMAWEB_INTERVAL": config["interval"]}
    args = [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a) for a in container["args"]]
    args[args.index("--sysfs") + 1] = str(tmp_path)  # the host's /sys exists only in the pod
    monkeypatch.setenv("NUMAWEB_AGENT_TOKEN", "t")
    options = parse(args)
    assert (options.node_name, options.cluster, options.interval) == ("node-1", "prod", 60.0)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert str(options.proc) == mounts["proc"] and str(options.kubelet_root) == mounts["kubelet"]
    assert str(options.kubelet_config).startswith(mounts["kubelet"])
