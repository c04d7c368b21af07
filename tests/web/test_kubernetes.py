"""The Kubernetes manifests (deploy/kubernetes: a kustomize base and an example installation) validate against the
Kubernetes API's own schemas, offline (kubernetes-validate ships them), and set only variables the settings read."""

import re
from pathlib import Path

import kubernetes_validate
import pytest

from tests.deploy import kustomize

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
VERSION = "1.30"  # the oldest Kubernetes the manifests are written for; every field they use exists since


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    return kustomize(KUBERNETES / "example")


def by_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_every_document_validates_against_the_api_schema(rendered):
    kinds = sorted(d["kind"] for d in rendered)
    assert kinds == ["ConfigMap", "Deployment", "Deployment", "Ingress", "Job", "Namespace", "Secret", "Service"]
    for doc in rendered:
        kubernetes_validate.validate(doc, VERSION, strict=True)  # raises, naming the field, on any mistake


def test_validation_would_catch_a_mistake(rendered):
    web = by_kind(rendered, "Deployment")["numaweb-web"]
    broken = {**web, "spec": {**web["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)


def test_the_base_renders_on_its_own():
    docs = kustomize(KUBERNETES / "base")
    assert {d["kind"] for d in docs} == {"ConfigMap", "Deployment", "Job", "Service"}
    for doc in docs:
        kubernetes_validate.validate(doc, VERSION, strict=True)


def test_pods_are_unprivileged_with_requests_and_probes(rendered):
    pods = {name: d["spec"]["template"]["spec"] for name, d in
            {**by_kind(rendered, "Deployment"), **by_kind(rendered, "Job")}.items()}
    assert set(pods) == {"numaweb-web", "numaweb-worker", "numaweb-migrate"}
    for name, pod in pods.items():
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0, name
        for container in pod["containers"]:
            assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"], name
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert container["image"] == "registry.example.com/numaweb:0.1.0", name
    web = pods["numaweb-web"]["containers"][0]
    assert web["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz?live"
    worker = pods["numaweb-worker"]["containers"][0]
    # the worker's liveness reads this pod's own worker's heartbeat only, not any worker's
    assert worker["livenessProbe"]["exec"]["command"] == ["python", "manage.py", "check_worker"]
    assert worker["command"][:4] == ["celery", "-A", "numaweb", "worker"]
    assert pods["numaweb-migrate"]["containers"][0]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    service = by_kind(rendered, "Service")["numaweb-web"]
    assert service["spec"]["selector"] == by_kind(rendered, "Deployment")["numaweb-web"]["spec"]["selector"][
        "matchLabels"]
    ingress = by_kind(rendered, "Ingress")["numaweb"]
    assert ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == "numaweb-web"


def test_variables_set_are_exactly_ones_the_settings_read(rendered):
    """Every variable the ConfigMap, the Secret or a container sets is read by numaweb/settings.py or
    numaweb/gunicorn_conf.py (a misspelt one would silently do nothing); the pods read both objects."""
    read = set()
    for module in ("settings.py", "gunicorn_conf.py"):
        text = (ROOT / "numaweb" / module).read_text()
        read |= set(re.findall(r'(?:environ\.get|envbool|envint|envlist)\(\s*"([A-Z_]+)"', text))
    config = by_kind(rendered, "ConfigMap")["numaweb-settings"]["data"]
    secret = by_kind(rendered, "Secret")["numaweb"]["stringData"]
    set_here = set(config) | set(secret)
    for doc in [*by_kind(rendered, "Deployment").values(), *by_kind(rendered, "Job").values()]:
        for container in doc["spec"]["template"]["spec"]["containers"]:
            set_here |= {e["name"] for e in container.get("env", [])}
            refs = {(next(iter(r)), next(iter(r.values()))["name"]) for r in container["envFrom"]}
            assert refs == {("configMapRef", "numaweb-settings"), ("secretRef", "numaweb")}
    assert set_here and set_here <= read, sorted(set_here - read)
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL"} <= set(secret)
    assert config["DJANGO_ALLOWED_HOSTS"] == by_kind(rendered, "Ingress")["numaweb"]["spec"]["rules"][0]["host"]
