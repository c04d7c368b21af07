"""Make-room pages: the button on a job's page (or a shape) posts here; the question's page polls the
worker's progress, then shows the plan: the moves, and every node it touches drawn before and after
(one cell per CPU, by NUMA node: held, free, moved, and the target's), with the downloads."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from numaweb.access.decorators import requires
from numaweb.inventory.models import Cluster
from numaweb.jobs.models import Job
from numaweb.room import defrag, services, tasks
from numaweb.room.export import room_dict
from numaweb.room.models import DefragRun, RoomPlan
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker.runs import BrokerUnavailable
from scheduler_core.model.cpuset import CPUSet

from .common import HtmxHttpRequest

POLL = "every 1s"
STATES = ("target", "moved", "held", "reserved")
MARKS = {"target": "T", "moved": "M", "reserved": "R"}  # colour is never the only cue


def room_context(job: Job, sessions: Iterable[SchedulingSession]) -> dict[str, object]:
    """What a job's page needs for its Make room button: the clusters (the job's last session's first), the job's
    latest make-room answers, its last session, whose profile the question uses unless another is chosen, and the
    engine's profiles to choose from."""
    clusters = list(Cluster.objects.order_by("name").only("pk", "name"))
    last = next((s.cluster_id for s in sessions), None)
    return {"room_clusters": clusters, "room_cluster": last or (clusters[0].pk if clusters else None),
            "room_plans": list(job.room_plans.order_by("-id")[:5]), "room_last": services.last_session(job),
            "room_profiles": SchedulingSession.PROFILES}


def _started(start: Callable[[], RoomPlan | DefragRun], route: str) -> HttpResponse:
    """Start a question from a form: its page once recorded, or the reason as text (400 naming the field, 429 with
    Retry-After, 503)."""
    text = "text/plain; charset=utf-8"
    try:
        row = start()
    except services.RoomError as exc:
        return HttpResponse(f"{exc.field}: {exc}", status=400, content_type=text)
    except services.Busy as exc:
        return HttpResponse(str(exc), status=429, content_type=text, headers={"Retry-After": str(exc.retry_after)})
    except BrokerUnavailable as exc:
        return HttpResponse(str(exc), status=503, content_type=text)
    return redirect(reverse(route, args=[row.pk]))


@requires("room.add_roomplan")
@require_POST
def start(request: HttpRequest) -> HttpResponse:
    """From a job's page (job, cluster) or the headroom box (cluster, cpu, memory, devices, count, policy)."""
    cluster = get_object_or_404(Cluster, pk=request.POST.get("cluster") or 0)
    data: dict = {k: v for k, v in request.POST.items() if k in ("job", "count", "policy", "profile") and v}
    if request.POST.get("cpu"):
        data["shape"] = {"cpu": request.POST["cpu"], "memory": request.POST.get("memory") or None,
                         "devices": request.POST.get("devices") or None}
    if request.POST.get("allow_evictions"):
        data["allow_evictions"] = True
    return _started(lambda: tasks.start(services.parse_request(cluster, data), request.user), "room:detail")


def _grid(node: dict, side: str) -> dict:
    """One node drawn: per NUMA node its CPUs in id order, each with its state on this side."""
    sets = {state: CPUSet.parse(node[side].get(state, "")) for state in ("target", "moved", "held")}
    sets["reserved"] = CPUSet.parse(node.get("reserved", ""))
    numa = []
    for n in node["numa"]:
        cells = []
        for cpu in CPUSet.parse(n["cpus"]):
            state = next((s for s in STATES if cpu in sets[s]), "free")
            cells.append({"cpu": cpu, "state": state, "mark": MARKS.get(state, "")})
        numa.append({"id": n["id"], "cells": cells})
    return {"node": node["node"], "numa": numa}


@requires("room.view_roomplan")
@require_GET
def detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    row = get_object_or_404(RoomPlan.objects.select_related("cluster", "job", "session"), pk=pk)
    data = room_dict(row, nodes=True)
    ctx = {"row": row, "plan": data, "poll": POLL,
           "grids": [(n["node"], _grid(n, "before"), _grid(n, "after")) for n in data.get("nodes") or ()]}
    if request.htmx and request.htmx.target == "room-body":
        return render(request, "room/_body.html", ctx)
    return render(request, "room/detail.html", ctx)


@requires("room.add_defragrun")
@require_POST
def defrag_start(request: HttpRequest) -> HttpResponse:
    """From the jobs page: rank a cluster's pending queue (cluster, optional profile)."""
    cluster = get_object_or_404(Cluster, pk=request.POST.get("cluster") or 0)
    data = {k: v for k, v in request.POST.items() if k == "profile" and v}
    return _started(lambda: tasks.start_defrag(defrag.parse_request(cluster, data), request.user), "room:defrag")


@requires("room.view_defragrun")
@require_GET
def defrag_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The run's progress while it runs; then the ranked jobs (conflicts marked) and the proposal."""
    row = get_object_or_404(DefragRun.objects.select_related("cluster", "session"), pk=pk)
    defrag.ADVISOR.watch(row)
    data = defrag.defrag_dict(row)
    names = {j["job"]: j["name"] for j in data["jobs"]}
    proposed = set((data["proposal"] or {}).get("jobs", ()))
    ranked = [{**j, "proposed": j["job"] in proposed, "conflict_names": [names.get(c, c) for c in j["conflicts"]]}
              for j in data["jobs"]]
    ctx = {"row": row, "advice": data, "ranked": ranked, "poll": POLL,
           "proposed": [names.get(pk, pk) for pk in (data["proposal"] or {}).get("jobs", ())]}
    if request.htmx and request.htmx.target == "defrag-body":
        return render(request, "room/_defrag_body.html", ctx)
    return render(request, "room/defrag.html", ctx)
