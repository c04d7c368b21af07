"""The jobs page (one cluster's jobs, the job, session and comparison forms), a job's page and finishing
a job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from django import forms
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from numaweb.access.decorators import requires
from numaweb.access.history import history_rows
from numaweb.inventory.models import Allocation, Cluster
from numaweb.jobs import lifecycle
from numaweb.jobs import services as job_services
from numaweb.jobs.forms import JobFilterForm
from numaweb.jobs.models import Job, Task
from numaweb.scheduling.models import Placement, SchedulingSession
from scheduler_core.model.cpuset import CPUSet

from .. import grid
from ..forms import JobForm, SessionForm
from .common import PODS_PER_PAGE, HtmxHttpRequest
from .comparisons import form_context as comparison_form
from .room import room_context

JOBS_PER_PAGE = 50
NAMESPACES_LISTED = 200  # the namespace filter's suggestions


def page_cluster(request: HttpRequest, form: forms.Form | None = None) -> Cluster | None:
    """The cluster the jobs page works in: the one a posted form names, else `?cluster=<id>`, else the
    first by name (None when there is no cluster)."""
    raw = str((form.data.get(form.add_prefix("cluster")) if form is not None and form.is_bound
               else request.GET.get("cluster")) or "")
    chosen = (Cluster.objects.filter(pk=int(raw)).first()  # a key has at most 19 digits; int() fails past 4,300
              if raw.isascii() and raw.isdigit() and len(raw) <= 19 else None)
    return chosen or Cluster.objects.order_by("name").first()


def jobs_context(request: HttpRequest, form: JobForm | None = None, session_form: SessionForm | None = None) -> dict:
    """The jobs page in one cluster: one page of its jobs (filtered by status, namespace and name on the
    server), and forms that submit into it and schedule or compare its jobs without listing them."""
    cluster = page_cluster(request, form or session_form)
    return {**_job_list_context(request, cluster), "cluster": cluster, "clusters": Cluster.objects.order_by("name"),
            "form": form or JobForm(initial={"cluster": cluster, "namespace": "default", "task": "main",
                                             "replicas": 1, "guaranteed": True}),
            "session_form": session_form or SessionForm(initial={"cluster": cluster, "profile": "volcano",
                                                                 "dry_run": True, "scope": "all"}),
            **comparison_form(cluster=cluster), "profiles": SchedulingSession.PROFILES}


def _job_list_context(request: HttpRequest, cluster: Cluster | None) -> dict:
    """One page of the cluster's jobs as filtered, newest first; the filter's values for the forms that
    take "the jobs matching the filter"; the query without the page for the pager's links."""
    filter_form = JobFilterForm(request.GET, auto_id="job-filter-%s")  # ids apart from the job form's
    filters = filter_form.filters()
    jobs = job_services.filter_jobs(Job.objects.filter(cluster=cluster), **filters)
    page = Paginator(jobs.defer("manifest").order_by("-id"), JOBS_PER_PAGE).get_page(request.GET.get("page"))
    counts = dict(Task.objects.filter(job__in=[j.pk for j in page]).values("job").annotate(n=Count("id"))
                  .values_list("job", "n"))
    for job in page:
        job.task_count = counts.get(job.pk, 0)
    query = request.GET.copy()
    query.pop("page", None)
    query["cluster"] = str(cluster.pk) if cluster else ""
    return {"page": page, "filter_form": filter_form, "filters": filters, "query": query.urlencode(),
            "namespaces": list(Job.objects.filter(cluster=cluster).order_by("namespace")
                               .values_list("namespace", flat=True).distinct()[:NAMESPACES_LISTED])}


@requires("jobs.view_job", write="jobs.add_job")
@require_http_methods(["GET", "POST"])
def job_list(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = JobForm(request.POST)
        job = form.save() if form.is_valid() else None
        if job is not None:
            url = reverse("pages:job", args=[job.pk])
            return HttpResponseClientRedirect(url, status=204) if request.htmx else redirect(url)
        if request.htmx:  # htmx swaps 2xx responses only: the form comes back with its errors as a 200
            return render(request, "pages/_job_form.html", {"form": form})
        return render(request, "pages/jobs.html", jobs_context(request, form), status=422)
    if request.htmx and request.htmx.target == "job-list":
        return render(request, "pages/_job_list.html", _job_list_context(request, page_cluster(request)))
    return render(request, "pages/jobs.html", jobs_context(request))


class _Replicas(Sequence[tuple[Task, int]]):
    """A job's pods as a sequence of (task, replica index) that a Paginator slices without building them all."""

    def __init__(self, tasks: list[Task]) -> None:
        self.tasks = tasks
        self.total = sum(t.replicas for t in tasks)

    def __len__(self) -> int:
        return self.total

    @overload
    def __getitem__(self, item: int) -> tuple[Task, int]: ...

    @overload
    def __getitem__(self, item: slice) -> list[tuple[Task, int]]: ...

    def __getitem__(self, item: int | slice) -> tuple[Task, int] | list[tuple[Task, int]]:
        if isinstance(item, int):
            i = range(self.total)[item]  # IndexError past the end, as any sequence
            return self[i:i + 1][0]
        start, stop, _ = item.indices(self.total)
        out: list[tuple[Task, int]] = []
        offset = 0
        for t in self.tasks:
            lo, hi = max(start - offset, 0), min(stop - offset, t.replicas)
            out.extend((t, i) for i in range(lo, hi))
            offset += t.replicas
        return out


@requires("jobs.view_job")
@require_GET
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The job, its status (derived from what its pods hold) and one page of its pods."""
    job = get_object_or_404(Job.objects.select_related("cluster").prefetch_related("tasks"), pk=pk)
    page = Paginator(_Replicas(list(job.tasks.all())), PODS_PER_PAGE).get_page(request.GET.get("page"))
    uids = {}
    for t, i in page:
        name = f"{job.name}-{t.name}-{i}"
        uids[f"{job.namespace}/{name}"] = (t, name)
    held = Allocation.objects.filter(job=job, pod__in=list(uids)).select_related("node")
    by_pod: dict[str, list[Allocation]] = {}
    for a in held:
        by_pod.setdefault(a.pod, []).append(a)
    latest = {}
    # the job's own sessions only: a make-room plan's verifying dry run is not where its pods went
    for p in Placement.objects.filter(session__cluster=job.cluster_id, namespace=job.namespace, job=job.name,
                                      pod__in=[n for _t, n in uids.values()],
                                      session__room_check=False).order_by("session_id"):
        latest[p.pod] = p
    states: dict[int, grid.NodeState] = {}
    pods = []
    for uid, (task, name) in uids.items():
        allocs = by_pod.get(uid, [])
        placement = latest.get(name)
        node = allocs[0].node if allocs else (placement.node if placement else None)
        mask = 0
        for a in allocs:
            mask |= CPUSet.parse(a.cpus or "").mask
        if not allocs and placement is not None:
            mask = CPUSet.parse(placement.cpus or "").mask
        mini = None
        if node is not None:
            if node.pk not in states:
                states[node.pk] = grid.node_state(node)
            mini = grid.render_grid(states[node.pk], mask, compact=True)
        pods.append({"name": name, "uid": uid, "task": task, "node": node, "cpus": str(CPUSet(mask)) if mask else "",
                     "held": bool(allocs), "placement": placement, "grid": mini})
    sessions = job.sessions.order_by("-id")[:10]
    return render(request, "pages/job.html", {"job": job, "tasks": job.tasks.all(), "pods": pods, "page": page,
                                              "allocations": job.allocations.count(), "sessions": sessions,
                                              "history": history_rows(job.history.all()),
                                              **room_context(job, sessions)})


@requires("jobs.change_job")
@require_POST
def job_finish(request: HttpRequest, pk: int) -> HttpResponse:
    """Finish the job: every allocation its pods hold is released in the same transaction."""
    job = get_object_or_404(Job, pk=pk)
    lifecycle.finish_job(job)
    return redirect(reverse("pages:job", args=[job.pk]))
