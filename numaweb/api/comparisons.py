"""API for deciding with numbers: comparisons of variants (`/api/comparisons/`) and headroom for a
pod shape (`/api/clusters/<id>/headroom/`). The figures come from `scheduler_core.scheduler.compare`."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping

from django.db.models import QuerySet
from django.http import QueryDict
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from numaweb import limits
from numaweb.api.caps import CappedLists
from numaweb.comparisons import services
from numaweb.comparisons.export import comparison_dict, csv_rows
from numaweb.comparisons.gate import Busy, headroom_slot
from numaweb.comparisons.models import Comparison
from numaweb.inventory.models import Cluster
from numaweb.jobs.models import Job
from numaweb.worker.runs import BrokerUnavailable
from scheduler_core.errors import EngineError
from scheduler_core.model.kubelet_config import TOPOLOGY_POLICIES
from scheduler_core.scheduler.compare import CPU_BIND_POLICIES, KOORDINATOR_STRATEGIES, STRATEGIES, Shape
from scheduler_core.scheduler.profiles import PROFILES

ERROR = inline_serializer("ComparisonError", {"detail": serializers.CharField()})
SHAPE_FIELDS = ("cpu", "memory", "devices", "policy", "profile")
#: the headroom question's query parameters as the schema states them, and as they are checked (after the
#: engine's own parsing, so its reasons come first): whatever the schema allows is answered, nothing else is.
#: CPU in whole CPUs or millicores from 1 CPU; memory in bytes or with a unit, below 2^63 bytes; devices as
#: resource=count pairs of extended resources (a domain, a slash, a name); each but cpu may be left empty
_DEVICE = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?=[0-9]{1,6}"
HEADROOM_PATTERNS = {
    "cpu": r"^([1-9][0-9]{0,5}|[1-9][0-9]{3,8}m)$",
    "memory": r"^([0-9]{1,18}|[0-9]{1,6}(Ki|Mi|Gi|Ti|k|M|G|T))?$",
    "devices": rf"^({_DEVICE}(,{_DEVICE})*)?$",
}


class CreateComparisonSerializer(CappedLists, serializers.Serializer):
    capped_lists = ("jobs", "variants")
    cluster = serializers.PrimaryKeyRelatedField(queryset=Cluster.objects.all())
    jobs = serializers.PrimaryKeyRelatedField(queryset=Job.objects.all(), many=True, required=False,
                                              help_text="jobs of the cluster to place; omitted or empty: the "
                                                        "jobs a session would take (every job of the cluster "
                                                        "with a pod left to place)")
    variants = limits.JSONField(help_text='1 to 8 variants: {"profile": "' + "|".join(PROFILES) + '", '
                                               '"topology_manager_policy", "topology_manager_scope", '
                                               '"cpu_manager_options": {...}, "weight", "distance_tie_break" '
                                               '(aligned), "strategy" (nrt: ' + ", ".join(STRATEGIES) + '; '
                                               'koordinator: ' + ", ".join(KOORDINATOR_STRATEGIES) + '), '
                                               '"numa_strategy" (koordinator: ' + ", ".join(KOORDINATOR_STRATEGIES)
                                               + '), "cpu_bind_policy" (koordinator: ' + ", ".join(CPU_BIND_POLICIES)
                                               + '), "ignore_list" (kai: a list of resource names)}; a setting '
                                               'the profile does not have is a 400 naming it')
    shape = limits.JSONField(required=False, allow_null=True,
                                  help_text='pod shape for headroom: {"cpu": "4", "memory": "8Gi", '
                                            '"devices": {"nvidia.com/gpu": 1}, "policy": "single-numa-node"}')

    def validate(self, attrs: dict) -> dict:
        try:
            services.check_jobs(attrs["cluster"], attrs.get("jobs") or ())
            attrs["variants"] = services.parse_variants(attrs["cluster"], attrs["variants"])
            attrs["shape"] = services.parse_shape(attrs.get("shape"))
        except services.ComparisonError as exc:
            raise ValidationError({exc.field: [str(exc)]}) from None
        return attrs


class CSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: list[list[object]], accepted_media_type: str | None = None,
               renderer_context: Mapping[str, object] | None = None) -> bytes:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerows(data)
        return out.getvalue().encode()


def _body(comparison: Comparison, request: Request, jobs: bool = True) -> dict:
    data = comparison_dict(comparison, nodes=False, jobs=jobs)
    data["url"] = reverse("api:comparison-detail", args=[comparison.pk], request=request)
    data["export_json"] = reverse("api:comparison-export", args=[comparison.pk], request=request) + "?format=json"
    data["export_csv"] = reverse("api:comparison-export", args=[comparison.pk], request=request) + "?format=csv"
    data["page"] = request.build_absolute_uri(reverse("comparisons:detail", args=[comparison.pk]))
    return data


class ComparisonExportSerializer(serializers.Serializer):
    """A comparison as plain data (documentation; built by export.comparison_dict): the JSON export."""

    id = serializers.IntegerField()
    cluster = serializers.IntegerField()
    status = serializers.ChoiceField(Comparison.Status.choices, help_text="from its variants")
    jobs = serializers.ListField(child=serializers.IntegerField())
    shape = serializers.DictField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    cluster_changed = serializers.BooleanField(help_text="a node's generation moved away from the snapshot meanwhile")
    changed_nodes = serializers.ListField(child=serializers.CharField())
    snapshot_nodes = serializers.IntegerField()
    variants = serializers.ListField(child=serializers.DictField(),
                                     help_text="index, label, settings, status, error, progress, engine_ms, metrics, "
                                               "headroom, changed_nodes (and in the export, nodes: per-node tables)")


class ComparisonSerializer(ComparisonExportSerializer):
    """A comparison as the API returns it: the export without the per-node tables, and its links."""

    url = serializers.URLField()
    page = serializers.URLField()
    export_json = serializers.URLField()
    export_csv = serializers.URLField()


class ComparisonSummarySerializer(ComparisonSerializer):
    """A comparison as the list returns it: its jobs counted, not listed (thousands of ids each at a whole
    cluster's jobs); the comparison's own URL lists them."""

    jobs = None  # type: ignore[assignment]
    jobs_count = serializers.IntegerField()


COMPARISON = ComparisonSerializer


class ComparisonViewSet(mixins.RetrieveModelMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Variants (profile + kubelet overrides) placed side by side as dry runs over one snapshot."""

    queryset = Comparison.objects.summaries().order_by("-id")
    serializer_class = CreateComparisonSerializer
    required_permissions = {"create": ["access.compare"]}  # operators compare (numaweb.access.drf)

    def get_queryset(self) -> QuerySet[Comparison]:
        """The export alone reads the variants' per-node tables."""
        qs = super().get_queryset()
        return qs.prefetch_related(None).prefetch_related("variants") if self.action == "export" else qs

    @extend_schema(request=CreateComparisonSerializer, responses={202: COMPARISON, 400: OpenApiTypes.OBJECT,
                                                                  503: ERROR})
    def handle_exception(self, exc: Exception) -> Response:
        """Errors are JSON (as documented) even when the export was asked for as CSV."""
        if getattr(self.request, "accepted_renderer", None) and self.request.accepted_renderer.format == "csv":
            self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), "application/json"
        return super().handle_exception(exc)

    def create(self, request: Request) -> Response:
        """Start a comparison: 202 with its URL; the workers run its variants in parallel, poll the URL."""
        serializer = CreateComparisonSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            comparison = services.start_comparison(data["cluster"], data["variants"], data.get("jobs") or None,
                                                   data["shape"])
        except BrokerUnavailable as exc:
            body = {"detail": str(exc)}
            if exc.session_id is not None:
                body["comparison"] = reverse("api:comparison-detail", args=[exc.session_id], request=request)
            return Response(body, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        comparison = self.get_queryset().get(pk=comparison.pk)
        body = _body(comparison, request)
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})

    @extend_schema(responses={200: COMPARISON})
    def retrieve(self, request: Request, pk: str | None = None) -> Response:
        """Status and, per variant, its settings, progress and metrics."""
        return Response(_body(self.get_object(), request))

    @extend_schema(responses={200: ComparisonSummarySerializer(many=True)})
    def list(self, request: Request) -> Response:
        """Comparisons, newest first, each as its own URL returns it but with its jobs counted (`jobs_count`)."""
        page = self.paginate_queryset(self.get_queryset())
        assert page is not None  # a paginator is set (settings: DEFAULT_PAGINATION_CLASS)
        return self.get_paginated_response([_body(c, request, jobs=False) for c in page])

    @extend_schema(parameters=[OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"],
                                                description="json (default; per-node tables included) or csv")],
                   responses={(200, "application/json"): ComparisonExportSerializer,
                              (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description=(
                                  "a header row, then one row per variant: settings, status, metrics, block "
                                  "histogram"))})
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, CSVRenderer])
    def export(self, request: Request, pk: str | None = None) -> Response:
        """The comparison as a download: JSON (everything) or CSV (one row per variant)."""
        comparison = self.get_object()
        fmt = request.accepted_renderer.format
        data = csv_rows(comparison) if fmt == "csv" else comparison_dict(comparison)
        name = f"comparison-{comparison.pk}.{fmt}"
        return Response(data, headers={"Content-Disposition": f'attachment; filename="{name}"'})


def parse_headroom_query(params: QueryDict) -> tuple[Shape, str]:
    """Shape and profile from query parameters; ValidationError names the parameter."""
    unknown = sorted(set(params) - set(SHAPE_FIELDS) - {"format"})
    if unknown:
        raise ValidationError({unknown[0]: [f"unknown parameter; expected: {', '.join(SHAPE_FIELDS)}"]})
    profile = params.get("profile", "aligned")
    if profile not in PROFILES:
        raise ValidationError({"profile": [f"unknown profile {profile!r}; expected one of: {', '.join(PROFILES)}"]})
    devices = ",".join(params.getlist("devices")) if hasattr(params, "getlist") else params.get("devices")
    policy = params.get("policy")
    if policy == "":
        raise ValidationError({"policy": [f"empty; one of {', '.join(TOPOLOGY_POLICIES)}, or leave it out for none"]})
    try:
        shape = Shape.parse(params.get("cpu"), params.get("memory"), devices or None, policy)
    except EngineError as exc:
        field, sep, reason = str(exc).partition(": ")
        if not sep or field not in SHAPE_FIELDS:
            field, reason = "cpu", str(exc)
        raise ValidationError({field: [reason]}) from None
    for field, pattern in HEADROOM_PATTERNS.items():
        value = devices if field == "devices" else params.get(field) or ""
        if not re.fullmatch(pattern, value or ""):
            raise ValidationError({field: [f"{value!r} is not written as the API takes it (pattern {pattern})"]})
    return shape, profile


class HeadroomView(APIView):
    """How many more pods of one shape a dry-run session of the profile would place, per node."""

    @extend_schema(parameters=[
        OpenApiParameter("cpu", {"type": "string", "pattern": HEADROOM_PATTERNS["cpu"]}, required=True,
                         description="CPU request of at least one whole CPU, e.g. 4 or 1500m"),
        OpenApiParameter("memory", {"type": "string", "pattern": HEADROOM_PATTERNS["memory"]},
                         description="memory request, e.g. 8Gi (empty: none)"),
        OpenApiParameter("devices", {"type": "string", "pattern": HEADROOM_PATTERNS["devices"]},
                         description="resource=count[,...], e.g. nvidia.com/gpu=1 (empty: none)"),
        OpenApiParameter("policy", OpenApiTypes.STR, enum=list(TOPOLOGY_POLICIES),
                         description="task topology policy (Volcano's; omitted: none)"),
        OpenApiParameter("profile", OpenApiTypes.STR, enum=list(PROFILES), description="default aligned"),
    ], responses={200: inline_serializer("Headroom", {
        "total": serializers.IntegerField(), "rejected": serializers.IntegerField(),
        "nodes": serializers.ListField(child=serializers.DictField())}), 400: OpenApiResponse(OpenApiTypes.OBJECT),
        429: OpenApiResponse(inline_serializer("HeadroomBusy", {"detail": serializers.CharField()}),
                             description="this web process answers NUMAWEB_HEADROOM_CONCURRENCY headroom questions "
                                         "at a time; `Retry-After` says when to ask again")})
    def get(self, request: Request, pk: int) -> Response:
        cluster = get_object_or_404(Cluster, pk=pk)
        shape, profile = parse_headroom_query(request.query_params)
        try:
            room = services.cluster_headroom(cluster, shape, profile, gate=headroom_slot)
        except Busy as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_429_TOO_MANY_REQUESTS,
                            headers={"Retry-After": str(exc.retry_after)})
        except EngineError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response({"cluster": cluster.pk, **room})
