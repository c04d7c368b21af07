"""REST API under /api/: clusters (+ snapshot import), nodes (+ topology upload, state check), allocations,
jobs, sessions (+ results).

Every request, reads included, needs a token or a logged-in session (settings.REST_FRAMEWORK) whose role holds
the model permission (numaweb.access.drf: `view_` to read, `add_`/`change_`/`delete_` to write, or what a view
declares); anonymous requests get 401 unless NUMAWEB_PUBLIC_READ opens the reads."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.db.models import Count, OuterRef, QuerySet, Subquery, TextField
from django.db.models.functions import Cast, Coalesce
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from numaweb.inventory import checks, kubelet_config, snapshot
from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation, Cluster, Node
from numaweb.jobs import bounds, lifecycle
from numaweb.jobs import services as job_services
from numaweb.jobs.forms import JobFilterForm
from numaweb.jobs.models import Job
from numaweb.limits import DepthLimitedJSONParser, StrictMultiPartParser
from numaweb.scheduling import outcomes, results
from numaweb.scheduling import services as scheduling
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker.runs import BrokerUnavailable
from scheduler_core.errors import EngineError

from . import serializers as s
from .pagination import NodePagination, PlacementPagination, ResultsPagination

ERROR = inline_serializer("Error", {"detail": serializers.CharField()})
CONFLICT = inline_serializer("Conflict", {
    "detail": serializers.CharField(), "cpus": serializers.CharField(help_text="the CPUs in dispute"),
    "holders": serializers.ListField(child=serializers.DictField(), help_text="allocations holding them")})


def _int_param(request: Request, name: str) -> int | None:
    """The id a query parameter names; None when absent (an empty one is no integer: 400 naming it)."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({name: [f"must be an integer, not {raw!r}"]}) from None
    if not 0 < value < 2**63:
        raise ValidationError({name: [f"must be a positive id, not {raw!r}"]})
    return value


def _bool_param(request: Request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if raw.lower() in ("true", "false"):  # the schema's boolean
        return raw.lower() == "true"
    raise ValidationError({name: [f"must be true or false, not {raw!r}"]})


ID = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}  # what _int_param accepts
CLUSTER_PARAM = OpenApiParameter("cluster", ID, description="only this cluster's items")


class ClusterViewSet(viewsets.ModelViewSet):
    serializer_class = s.ClusterSerializer
    queryset = Cluster.objects.annotate(node_count=Count("nodes")).order_by("name")
    required_permissions = {"import_snapshot": ["access.import_inventory"]}  # numaweb.access.drf

    @extend_schema(request={"multipart/form-data": s.SnapshotUploadSerializer},
                   responses={200: s.ImportReportSerializer, 400: OpenApiResponse(description="the reason")},
                   parameters=[OpenApiParameter(name, OpenApiTypes.BOOL, description=what) for name, what in (
                       ("dry_run", "report what would change, change nothing"),
                       ("prune", "flag nodes the snapshot no longer lists as removed"),
                       ("allow_empty", "accept a snapshot without nodes"))])
    @action(detail=True, methods=["post"], url_path="import", parser_classes=[StrictMultiPartParser, FormParser],
            serializer_class=s.SnapshotUploadSerializer)
    def import_snapshot(self, request: Request, pk: str | None = None) -> Response:
        """Create or update the cluster's nodes, replayed allocations and pending jobs from a kubectl
        snapshot; the report says what changed and every disagreement (all or nothing). `dry_run`
        previews, `prune` removes nodes the snapshot no longer lists, `allow_empty` accepts a snapshot
        without nodes (refused otherwise): as form fields or query parameters."""
        cluster = self.get_object()
        upload = s.SnapshotUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        flags = {name: bool(_bool_param(request, name) or upload.validated_data[name])
                 for name in ("dry_run", "prune", "allow_empty")}
        data = s._upload_bytes(upload.validated_data["file"], "file", checks.SNAPSHOT_UPLOAD_LIMIT)
        try:
            report = snapshot.import_snapshot(cluster, data, **flags)
        except (EngineError, snapshot.EmptySnapshot) as exc:
            raise ValidationError({"file": [str(exc)]}) from exc
        return Response(report)


@extend_schema_view(list=extend_schema(parameters=[CLUSTER_PARAM]))
class NodeViewSet(viewsets.ModelViewSet):
    """Nodes with their topology, 10 a page unless ?page_size= asks for more (NodePagination)."""

    serializer_class = s.NodeSerializer
    pagination_class = NodePagination
    required_permissions = {"check_state": ["access.run_whatif"],  # reads only: operators, as what-if
                            "set_kubelet_config": ["inventory.change_node"]}

    def get_queryset(self) -> QuerySet[Node]:
        # counted per node by a subquery: a join grouped by node sorted and grouped every node's row (topology
        # documents and all) before a page of 10 was cut from it, 1 s at 5,000 nodes
        held = Allocation.objects.filter(node=OuterRef("pk")).order_by().values("node").annotate(n=Count("pk"))
        qs = Node.objects.select_related("cluster", "report").annotate(
            allocation_count=Coalesce(Subquery(held.values("n")), 0)).order_by("cluster_id", "name")
        if self.action != "list":
            return qs
        # a list serves each topology document as stored, read as text (numaweb.api.rawjson): decoding and
        # encoding again 100 documents of about 21 KB was most of a 100-node page's CPU time
        qs = qs.defer("topology").annotate(topology_text=Cast("topology", TextField()))
        cluster = _int_param(self.request, "cluster")
        return qs.filter(cluster_id=cluster) if cluster else qs

    @extend_schema(request={"multipart/form-data": s.NodeUploadSerializer},
                   responses={201: s.NodeUploadResultSerializer,
                              400: OpenApiResponse(description="the engine's message")},
                   parameters=[])
    @action(detail=False, methods=["post"], parser_classes=[StrictMultiPartParser, FormParser],
            serializer_class=s.NodeUploadSerializer)
    def upload(self, request: Request) -> Response:
        """Create or replace a node from a topology file (format detected unless given)."""
        upload = s.NodeUploadSerializer(data=request.data, context={"request": request})
        upload.is_valid(raise_exception=True)
        imported = upload.save()
        node = Node.objects.annotate(allocation_count=Count("allocations")).get(pk=imported.pk)
        node.import_notes = imported.import_notes
        return Response(s.NodeUploadResultSerializer(node, context={"request": request}).data,
                        status=status.HTTP_201_CREATED)


    @extend_schema(request={"multipart/form-data": s.StateCheckUploadSerializer},
                   responses={200: s.StateCheckSerializer, 400: OpenApiResponse(description="the reason")})
    @action(detail=True, methods=["post"], url_path="check-state", parser_classes=[StrictMultiPartParser, FormParser],
            serializer_class=s.StateCheckUploadSerializer)
    def check_state(self, request: Request, pk: str | None = None) -> Response:
        """Replay the node's real kubelet state through the engine's kubelet model: per container,
        predicted versus actual CPUs and memory, and the verdict. Reads only; nothing is stored."""
        node = self.get_object()
        upload = s.StateCheckUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        planned = upload.validated_data.pop("planned_settings", None)
        if planned is not None and not isinstance(planned, dict):
            raise ValidationError({"planned_settings": ["must be an object of node settings"]})
        files = {k: s._upload_bytes(v, k) for k, v in upload.validated_data.items()}
        try:
            result = checks.check_node_state(node, files["cpu_state"], files.get("memory_state"), files.get("pods"),
                                             files.get("kubelet_config"), planned)
        except EngineError as exc:
            field = (exc.field or "").split(":")[0]
            raise ValidationError({field if field in files or field == "planned_settings" else "cpu_state":
                                   [str(exc)]}) from exc
        return Response({**result.to_dict(), "pods_on_node": checks.pods_on_node(node)})

    @extend_schema(responses={200: OpenApiResponse(description="the node's settings as a KubeletConfiguration YAML")},
                   parameters=[])
    @action(detail=True, methods=["get"], url_path="kubelet-config")
    def kubelet_config(self, request: Request, pk: str | None = None) -> HttpResponse:
        """The node's kubelet settings as a KubeletConfiguration (config.yaml) to merge into the node's file."""
        return HttpResponse(kubelet_config.export(self.get_object()), content_type="application/yaml")

    @extend_schema(request={"multipart/form-data": s.KubeletConfigUploadSerializer},
                   responses={200: s.NodeSerializer, 400: OpenApiResponse(description="the field and the reason")},
                   parameters=[])
    @kubelet_config.mapping.post
    def set_kubelet_config(self, request: Request, pk: str | None = None) -> Response:
        """Set the node's kubelet settings from its KubeletConfiguration (config.yaml); the node's allocations
        must still fit them."""
        node = self.get_object()
        upload = s.KubeletConfigUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        try:
            node = kubelet_config.apply(node, s._upload_bytes(upload.validated_data["file"], "file"))
        except EngineError as exc:
            raise ValidationError({"file": [str(exc)]}) from exc
        node = Node.objects.annotate(allocation_count=Count("allocations")).get(pk=node.pk)
        return Response(s.NodeSerializer(node, context={"request": request}).data)


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("node", ID, description="only this node's allocations")]))
class AllocationViewSet(mixins.CreateModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                        mixins.ListModelMixin, viewsets.GenericViewSet):
    """Allocations are created (checked by the engine against the node) and deleted, never edited."""

    serializer_class = s.AllocationSerializer

    def get_queryset(self) -> QuerySet[Allocation]:
        qs = Allocation.objects.order_by("node_id", "id")
        node = _int_param(self.request, "node") if self.action == "list" else None
        return qs.filter(node_id=node) if node else qs

    @extend_schema(responses={201: s.AllocationSerializer, 400: OpenApiResponse(description="bad field"),
                              409: CONFLICT})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        """Hold CPUs (and memory, devices) for a pod's container: checked and written with the node held, so
        of two writers asking for one CPU exactly one succeeds; the other gets 409 naming CPUs and holder."""
        return super().create(request, *args, **kwargs)

    def perform_destroy(self, instance: Allocation) -> None:
        inventory.remove_allocation(instance)


JOB_FILTERS = [
    CLUSTER_PARAM,
    OpenApiParameter("status", OpenApiTypes.STR, enum=Job.Status.values,
                     description="only jobs with this status"),
    OpenApiParameter("namespace", {"type": "string", "maxLength": 63},
                     description="only jobs in this namespace (exact)"),
    OpenApiParameter("q", {"type": "string", "maxLength": 253},
                     description="only jobs whose name contains this (case-insensitive)"),
]


@extend_schema_view(list=extend_schema(parameters=JOB_FILTERS))
class JobViewSet(mixins.CreateModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                 mixins.ListModelMixin, viewsets.GenericViewSet):
    """Jobs, each in one cluster. Deleting a job, or finishing it, releases what its pods hold in the same
    transaction. The list is paged (?page=, ?page_size=) and filtered on the server like the jobs page."""

    serializer_class = s.JobSerializer
    parser_classes = [DepthLimitedJSONParser, FormParser, StrictMultiPartParser]
    pagination_class = ResultsPagination
    required_permissions = {"finish": ["jobs.change_job"]}  # operators finish jobs (numaweb.access.drf)

    def get_queryset(self) -> QuerySet[Job]:
        qs = Job.objects.prefetch_related("tasks").order_by("id")
        if self.action != "list":
            return qs
        cluster = _int_param(self.request, "cluster")
        if self.request.query_params.get("status") == "":  # the page's "any status"; the API's is to leave it out
            raise ValidationError({"status": [f"empty; one of {', '.join(Job.Status.values)}, or leave it out"]})
        form = JobFilterForm(self.request.query_params)
        if not form.is_valid():
            raise ValidationError({name: [str(e) for e in errors] for name, errors in form.errors.items()})
        return job_services.filter_jobs(qs.filter(cluster_id=cluster) if cluster else qs, **form.filters())

    def perform_destroy(self, instance: Job) -> None:
        lifecycle.delete_job(instance)

    @extend_schema(request=None, responses={200: s.JobSerializer})
    @action(detail=True, methods=["post"])
    def finish(self, request: Request, pk: str | None = None) -> Response:
        """Mark the job finished and release every allocation its pods hold (one transaction)."""
        job = self.get_object()
        lifecycle.finish_job(job)
        return Response(self.get_serializer(job).data)


@extend_schema_view(list=extend_schema(parameters=[CLUSTER_PARAM]))
class SessionViewSet(mixins.CreateModelMixin, mixins.RetrieveModelMixin, mixins.ListModelMixin,
                     viewsets.GenericViewSet):
    serializer_class = s.SessionSerializer
    pagination_class = ResultsPagination  # honours ?page_size= (a dashboard asks for the last few)

    def get_queryset(self) -> QuerySet[SchedulingSession]:
        qs = SchedulingSession.objects.order_by("-id")
        cluster = _int_param(self.request, "cluster") if self.action == "list" else None
        return qs.filter(cluster_id=cluster) if cluster else qs

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        """Sessions, newest first, read as values (a page builds no model instances)."""
        page = self.paginate_queryset(self.get_queryset().values_list(*s.session_columns()))
        assert page is not None  # pagination_class is set
        serializer = s.SessionSerializer(context=self.get_serializer_context())
        return self.get_paginated_response([serializer.represent(values) for values in page])

    @extend_schema(responses={202: s.SessionSerializer, 503: ERROR})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        """Start a session: 202 with its URL; the worker runs it, poll the URL for progress."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        jobs = data.get("jobs")
        try:
            session = scheduling.start_session(data["cluster"], data.get("profile", "volcano"),
                                               data.get("dry_run", False), jobs if jobs else None)
        except (job_services.NotSchedulable, bounds.OutOfBounds) as exc:  # the jobs taken when none are named
            raise ValidationError({"jobs": [str(exc)]}) from exc
        except BrokerUnavailable as exc:
            body = {"detail": str(exc)}
            if exc.session_id is not None:
                body["session"] = reverse("api:session-detail", args=[exc.session_id], request=request)
            return Response(body, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        session.refresh_from_db()
        body = self.get_serializer(session).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})

    def retrieve(self, request: Request, *args: object, **kwargs: object) -> Response:
        """A session with its progress; a running one whose worker is lost is shown failed with the reason, and
        queued again when it may run again (scheduling.watch)."""
        session = self.get_object()
        scheduling.watch(session)
        return Response(self.get_serializer(session).data)

    @extend_schema(request=None, responses={202: s.SessionSerializer, 409: ERROR, 503: ERROR})
    @action(detail=True, methods=["post"])
    def rerun(self, request: Request, pk: str | None = None) -> Response:
        """Run a failed session (or a running one whose worker is lost) again; its earlier run wrote nothing."""
        session = self.get_object()
        try:
            session = scheduling.rerun_session(session)
        except scheduling.SessionNotRunnable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except BrokerUnavailable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response(self.get_serializer(session).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(parameters=[
        OpenApiParameter("placed", OpenApiTypes.BOOL, description="only placed (true) or unplaced (false) pods"),
        OpenApiParameter("outcome", OpenApiTypes.STR, enum=[*outcomes.OUTCOMES], description=(
            "only the pods with this outcome: unplaced (no node, or rolled back), rejected (placed, refused by the "
            "kubelet), multi_numa (admitted across NUMA nodes), mismatch (admitted on other CPUs than predicted)")),
        OpenApiParameter("reason", OpenApiTypes.STR, description=(
            "only the pods with this kubelet reason (e.g. SMTAlignmentError), or whose message holds these words")),
        OpenApiParameter("node", OpenApiTypes.STR, description="only the pods placed on this node (its name)"),
        OpenApiParameter("job", OpenApiTypes.STR, description="only this job's pods: name or namespace/name"),
        OpenApiParameter("task", OpenApiTypes.STR, description="only this task's pods"),
        OpenApiParameter("sort", OpenApiTypes.STR, enum=[*outcomes.SORTS, *(f"-{k}" for k in outcomes.SORTS)],
                         description="order (default index: the scheduling order, which also breaks ties)"),
    ], responses=s.PlacementSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=PlacementPagination)
    def results(self, request: Request, pk: str | None = None) -> Response:
        """Per pod: the node chosen, what it holds, predicted vs admitted, and verdicts per node class; filtered
        by outcome, kubelet reason, node, job and task, and sorted."""
        session = self.get_object()
        try:
            query = outcomes.PodQuery.parse(request.query_params)
        except outcomes.BadQuery as exc:
            raise ValidationError({exc.field: [exc.reason]}) from exc
        qs = query.apply(session, session.placements.all())
        placed = _bool_param(request, "placed")
        if placed is not None:
            qs = qs.filter(predicted=placed)
        page = self.paginate_queryset(qs)
        assert page is not None  # pagination_class is set
        records = {p.index: r for p, r in zip(page, results.pod_records(session, page), strict=True)}
        return self.get_paginated_response(
            s.PlacementSerializer(page, many=True, context={"request": request, "records": records}).data)

    @extend_schema(responses={(200, "application/json"): OpenApiTypes.OBJECT, 409: ERROR})
    def explanation(self, request: Request, pk: str | None = None) -> StreamingHttpResponse | Response:
        """The whole explanation as one `numaweb.session/1` document (the engine's schema), streamed."""
        session = self.get_object()
        if session.status != SchedulingSession.DONE:
            return Response({"detail": f"session {session.pk} is {session.status}; its explanation exists once "
                                       "it is done"}, status=status.HTTP_409_CONFLICT)
        response = StreamingHttpResponse(streamed(request, results.export_chunks(session)),
                                         content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="session-{session.pk}.json"'
        return response


def streamed(request: Request, chunks: Iterator[str]) -> Iterator[str] | AsyncIterator[str]:
    """`chunks` as the server can stream them: under ASGI (the product's server) an async iterator that pulls
    a batch at a time in the request's own thread (Django reads a plain iterator whole into memory there first);
    under WSGI (tests, tools) the iterator itself."""
    if "wsgi.input" in request.META:
        return chunks
    return _pulled(chunks)


async def _pulled(chunks: Iterator[str], batch: int = 256) -> AsyncIterator[str]:
    take = sync_to_async(lambda: list(itertools.islice(chunks, batch)), thread_sensitive=True)
    while parts := await take():
        yield "".join(parts)
