"""Builders shared by the web, API and worker tests (real engine objects, real rows)."""

from __future__ import annotations

import time

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from numaweb.inventory import services
from numaweb.inventory.models import Cluster, Node
from numaweb.jobs import services as job_services
from numaweb.jobs.models import Job
from scheduler_core.model.kubelet_config import KubeletConfig
from scheduler_core.model.topology import synthetic

GiB = 2**30


def token_client(user) -> APIClient:
    """An API client sending `user`'s token."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def wait_done(client, url: str, timeout: float = 30.0) -> dict:
    """Poll a run's API URL (session, comparison, make room) until it is done or failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(url).json()
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(0.05)
    raise AssertionError(f"not finished after {timeout}s: {body}")


def make_node(cluster: Cluster, name: str, shape=(2, 1, 4, 1), policy: str = "best-effort", **kubelet) -> Node:
    """A node of synthetic shape (sockets, numa per socket, cores per numa, threads), CPU Manager static."""
    node = Node(cluster=cluster, name=name)
    services.set_topology(node, synthetic(*shape, memory_per_numa=16 * GiB), "synthetic")
    services.set_kubelet(node, KubeletConfig.from_dict(
        {"cpu_manager_policy": "static", "topology_manager_policy": policy, **kubelet}))
    node.save()
    return node


def make_job(name: str, cpus: str = "2", replicas: int = 1, policy: str = "best-effort", memory: str = "1Gi",
             min_available: int | None = None, cluster: Cluster | None = None) -> Job:
    """A job in `cluster` (default: the only cluster there is)."""
    res = {"cpu": cpus, "memory": memory}
    data = {"name": name, "tasks": [{"name": "t", "replicas": replicas, "topology_policy": policy,
                                     "template": {"containers": [{"name": "c", "requests": res,
                                                                  "limits": dict(res)}]}}]}
    if min_available is not None:
        data["min_available"] = min_available
    return job_services.save_job(job_services.engine_job_from_data(data), cluster or Cluster.objects.get(),
                                 explicit_min=min_available is not None)


def allocated_cpus(node: Node) -> list[int]:
    """Every CPU id held on the node, one entry per holder (duplicates mean double booking)."""
    from scheduler_core.model.cpuset import CPUSet

    out: list[int] = []
    for a in node.allocations.all():
        out.extend(CPUSet.parse(a.cpus))
    return out


class use_broker:
    """Point the Celery app at another broker for a block (the app reads settings once, so the
    connection pool is reset on the way in and out)."""

    def __init__(self, url: str, transport_options: dict | None = None) -> None:
        self.url, self.options = url, transport_options or {}

    def _switch(self, url: str, options: dict) -> None:
        import kombu.pools

        from numaweb.celery import app

        if app._pool is not None:
            app._pool.force_close_all()
        app._pool = None
        app.amqp._producer_pool = None
        kombu.pools.reset()
        app.conf.broker_url = url
        app.conf.broker_transport_options = options
        app.conf.broker_write_url = None
        app.conf.broker_read_url = None

    def __enter__(self):
        from numaweb.celery import app

        self.saved = (app.conf.broker_url, dict(app.conf.broker_transport_options))
        self._switch(self.url, self.options)
        return self

    def __exit__(self, *exc) -> None:
        self._switch(*self.saved)


def filesystem_broker(folder) -> use_broker:
    """The embedded file-system queue in `folder` (tests never write into the product's var/broker)."""
    folder.mkdir(parents=True, exist_ok=True)
    return use_broker("numaweb-fs://", {"data_folder_in": str(folder), "data_folder_out": str(folder),
                                        "control_folder": str(folder / "control"),
                                        "store_processed": False, "polling_interval": 0.05})
