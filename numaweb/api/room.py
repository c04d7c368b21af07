"""API for make room (`POST /api/clusters/<id>/make-room/`, `GET /api/make-room/<id>/` and its plan as
JSON or a kubectl script): the fewest pod moves after which a pending job, or a shape × count, fits.
The question runs on a worker; the answer comes from `scheduler_core.scheduler.room` (docs/MAKE_ROOM.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from numaweb import limits
from numaweb.inventory.models import Cluster
from numaweb.limits import DepthLimitedJSONParser
from numaweb.room import defrag, services, tasks
from numaweb.room.export import kubectl_script, plan_json, room_dict
from numaweb.room.models import DefragRun, RoomPlan
from numaweb.room.services import NAME_PATTERN
from numaweb.scheduling.models import SchedulingSession
from numaweb.worker.runs import BrokerUnavailable

ERROR = inline_serializer("MakeRoomError", {"detail": serializers.CharField()})
FIELD_ERRORS = OpenApiResponse(OpenApiTypes.OBJECT, description="{field: [reason]} for the field at fault")


def _accepted(request: Request, pk: int, parse: Callable[[Cluster, Any], Any], start: Callable[[Any, Any], Any],
              body: Callable[[Any, Request], dict]) -> Response:
    """A question for a worker, as make room and the advisor take one: 400 naming the field, 429 when too much is
    waiting (its Retry-After; the limit's setting where one is), 503 when the broker is down, else 202 with the
    row's URL."""
    cluster = get_object_or_404(Cluster, pk=pk)
    try:
        fields = parse(cluster, request.data)
    except services.RoomError as exc:
        raise ValidationError({exc.field: [str(exc)]}) from None
    try:
        row = start(fields, request.user)
    except services.Busy as exc:
        answer = {"detail": str(exc), **({"limit": exc.setting} if exc.setting else {})}
        return Response(answer, status=status.HTTP_429_TOO_MANY_REQUESTS, headers={"Retry-After": str(exc.retry_after)})
    except BrokerUnavailable as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    row.refresh_from_db()
    data = body(row, request)
    return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": data["url"]})


class MakeRoomRequestSerializer(serializers.Serializer):
    """The question (documentation; checked by room.services.parse_request, which names the field)."""

    job = serializers.IntegerField(required=False, help_text="a pending job's id (or shape + count)")
    shape = limits.JSONField(required=False, help_text='{"cpu": "16", "memory": "32Gi", "devices": {...}, '
                                                            '"policy": "single-numa-node"}')
    count = serializers.IntegerField(required=False, help_text="pods of the shape, a gang of all of them")
    policy = serializers.CharField(required=False, help_text="the shape's task topology policy")
    profile = serializers.ChoiceField(choices=list(SchedulingSession.PROFILES), required=False, help_text=(
        "default: for a job, the profile (and numa-aware weight) of its last session, the one that left it pending "
        "(the answer's profile_from names it; aligned when it has none); for a shape, aligned"))
    allow_evictions = serializers.BooleanField(required=False, help_text="evict lower-priority pods when moves "
                                                                         "alone cannot make room (default false)")
    protected_namespaces = serializers.ListField(child=serializers.RegexField(NAME_PATTERN.pattern), required=False,
                                                 help_text="pods here never move (default: the setting)")
    max_priority = serializers.IntegerField(required=False, help_text="pods at or above this priority never move")
    pinned = serializers.ListField(child=serializers.RegexField(NAME_PATTERN.pattern), required=False,
                                   help_text="namespace/name patterns (shell wildcards) that never move")
    max_moves = serializers.IntegerField(required=False, help_text="the most moves looked for")


class MoveSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    pod = serializers.CharField()
    from_node = serializers.CharField()
    from_numa = serializers.ListField(child=serializers.IntegerField())
    from_cpus = serializers.CharField()
    to_node = serializers.CharField(required=False)
    to_numa = serializers.ListField(child=serializers.IntegerField(), required=False)
    to_cpus = serializers.CharField(required=False)
    cpus = serializers.IntegerField()
    priority = serializers.IntegerField()


class MakeRoomSerializer(serializers.Serializer):
    """A make-room question as the API returns it (documentation; built by room.export.room_dict)."""

    id = serializers.IntegerField()
    url = serializers.URLField()
    page = serializers.URLField()
    plan_json = serializers.URLField()
    plan_script = serializers.URLField()
    cluster = serializers.IntegerField()
    job = serializers.IntegerField(allow_null=True)
    target = serializers.CharField()
    profile = serializers.CharField(help_text="the profile the search used")
    weight = serializers.IntegerField(help_text="its numa-aware weight")
    profile_from = serializers.IntegerField(allow_null=True, help_text=(
        "the job's session whose profile and weight these are (its last, which left it pending); null: the profile "
        "was asked for, or aligned by default"))
    profile_source = serializers.CharField(help_text='which profile it used, in words: "asked for", "the job\'s last '
                                                     'session, the one that left it pending" (profile_from), "the '
                                                     'default: no session of the job yet"')
    status = serializers.ChoiceField(RoomPlan.Status.choices)
    error = serializers.CharField()
    progress = serializers.DictField()
    fits_now = serializers.BooleanField(allow_null=True)
    found = serializers.BooleanField(allow_null=True, help_text="a verified plan (false: none within the bounds)")
    moves = MoveSerializer(many=True, allow_null=True)
    evictions = MoveSerializer(many=True, allow_null=True)
    moved_cpus = serializers.IntegerField(allow_null=True)
    minimal = serializers.BooleanField(allow_null=True, help_text="proven the fewest pods moved, then CPUs")
    lower_bound = serializers.IntegerField(allow_null=True, help_text="the fewest moves any plan needs, as proven")
    reason = serializers.CharField(allow_null=True, help_text="why there is no plan")
    after = inline_serializer("MakeRoomAfter", {
        "pods_placed": serializers.IntegerField(), "topology_affinity_errors": serializers.IntegerField(),
        "admission_errors": serializers.IntegerField(),
        "session": serializers.IntegerField(allow_null=True, help_text="the dry-run session that verified it")},
        allow_null=True)


def _body(row: RoomPlan, request: Request) -> dict:
    data = room_dict(row)
    data["url"] = reverse("api:make-room-detail", args=[row.pk], request=request)
    data["plan_json"] = reverse("api:make-room-plan-json", args=[row.pk], request=request)
    data["plan_script"] = reverse("api:make-room-plan-script", args=[row.pk], request=request)
    data["page"] = request.build_absolute_uri(reverse("room:detail", args=[row.pk]))
    return data


class MakeRoomView(APIView):
    """Ask for the fewest moves after which a job (or a shape × count) fits on the cluster."""

    required_permissions = {"post": ["room.add_roomplan"]}  # operators (numaweb.access.drf)
    # JSON only: its lists (protected namespaces, pins) and options have no faithful form encoding
    parser_classes = [DepthLimitedJSONParser]

    @extend_schema(request=MakeRoomRequestSerializer, responses={
        202: MakeRoomSerializer, 400: FIELD_ERRORS, 401: ERROR, 403: ERROR, 404: ERROR, 503: ERROR})
    def post(self, request: Request, pk: int) -> Response:
        """202 with the question's URL; a worker answers it (progress on the URL), then the plan is there."""
        return _accepted(request, pk, services.parse_request, tasks.start, _body)


class MakeRoomDetailView(APIView):
    queryset = RoomPlan.objects.all()

    @extend_schema(responses={200: MakeRoomSerializer, 401: ERROR, 403: ERROR, 404: ERROR})
    def get(self, request: Request, pk: int) -> Response:
        """The question's status and progress and, once answered, its plan."""
        return Response(_body(get_object_or_404(RoomPlan, pk=pk), request))


class MakeRoomPlanView(APIView):
    queryset = RoomPlan.objects.all()
    script = False

    @extend_schema(responses={(200, "application/json"): OpenApiTypes.OBJECT, (200, "text/x-shellscript"):
                              OpenApiTypes.STR, 401: ERROR, 403: ERROR, 404: ERROR,
                              409: OpenApiResponse(ERROR, description="not answered yet, or no plan")})
    def get(self, request: Request, pk: int) -> HttpResponse:
        """The plan as a download: JSON, or a shell script of kubectl commands to review (it runs nothing
        unless given --run)."""
        row = get_object_or_404(RoomPlan.objects.select_related("cluster", "job"), pk=pk)
        if row.status != RoomPlan.DONE or not (row.result or {}).get("found"):
            return Response({"detail": f"make room {row.pk} has no plan ({row.status}"
                                       f"{': ' + row.result['reason'] if row.result else ''})"},
                            status=status.HTTP_409_CONFLICT)
        if self.script:
            response = HttpResponse(kubectl_script(row), content_type="text/x-shellscript; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="make-room-{row.pk}.sh"'
            return response
        return Response(plan_json(row), headers={
            "Content-Disposition": f'attachment; filename="make-room-{row.pk}.json"'})


class DefragRequestSerializer(serializers.Serializer):
    """The advisor's options, all optional (documentation; checked by room.defrag.parse_request, which names the
    field)."""

    profile = serializers.ChoiceField(choices=list(SchedulingSession.PROFILES), required=False, help_text=(
        "default: the profile (and numa-aware weight) of the last session of the pending jobs, the one that left them "
        "pending (profile_from names it; aligned when there is none)"))
    allow_evictions = serializers.BooleanField(required=False, help_text="evict lower-priority pods when moves "
                                                                         "alone cannot make room (default false)")
    protected_namespaces = serializers.ListField(child=serializers.RegexField(NAME_PATTERN.pattern), required=False,
                                                 help_text="pods here never move (default: the setting)")
    max_priority = serializers.IntegerField(required=False, help_text="pods at or above this priority never move")
    pinned = serializers.ListField(child=serializers.RegexField(NAME_PATTERN.pattern), required=False,
                                   help_text="namespace/name patterns (shell wildcards) that never move")
    max_moves = serializers.IntegerField(required=False, min_value=1, help_text="the most moves looked for per job")


class DefragJobSerializer(serializers.Serializer):
    job = serializers.IntegerField(help_text="the job's id")
    name = serializers.CharField(help_text="namespace/name")
    fits_now = serializers.BooleanField()
    found = serializers.BooleanField(help_text="a verified plan (false: none within the bounds)")
    moves = serializers.IntegerField(allow_null=True, help_text="pods its plan moves (or evicts); null: no plan")
    moved_cpus = serializers.IntegerField(allow_null=True)
    minimal = serializers.BooleanField(help_text="proven the fewest pods moved, then CPUs")
    lower_bound = serializers.IntegerField()
    reason = serializers.CharField(help_text="why there is no plan")
    conflicts = serializers.ListField(child=serializers.IntegerField(),
                                      help_text="jobs whose plans move a pod this one's plan moves")


class DefragSerializer(serializers.Serializer):
    """An advisor run as the API returns it (documentation; built by room.defrag.defrag_dict)."""

    id = serializers.IntegerField()
    url = serializers.URLField()
    page = serializers.URLField()
    cluster = serializers.IntegerField()
    profile = serializers.CharField(help_text="the profile every job was asked with")
    weight = serializers.IntegerField(help_text="its numa-aware weight")
    profile_from = serializers.IntegerField(allow_null=True, help_text="the session whose profile it is")
    profile_source = serializers.CharField(help_text="which profile it used, in words")
    options = serializers.DictField()
    status = serializers.ChoiceField(DefragRun.Status.choices)
    error = serializers.CharField()
    progress = serializers.DictField(help_text="jobs asked about: done, total")
    engine_ms = serializers.FloatField(allow_null=True)
    jobs = DefragJobSerializer(many=True, help_text="ranked: fits now, then fewest moves, then CPUs moved; no plan "
                                                    "last")
    proposal = inline_serializer("DefragProposal", {
        "jobs": serializers.ListField(child=serializers.IntegerField(), help_text="the jobs it places, by id"),
        "moves": MoveSerializer(many=True, help_text="in the order they are carried out"),
        "moved_cpus": serializers.IntegerField(),
        "after": inline_serializer("DefragAfter", {
            "pods_placed": serializers.IntegerField(), "topology_affinity_errors": serializers.IntegerField(),
            "admission_errors": serializers.IntegerField(),
            "session": serializers.IntegerField(allow_null=True, help_text="the dry-run session that verified it")},
            allow_null=True)}, allow_null=True, help_text="null until done")
    stopped = serializers.CharField(allow_null=True, help_text="the time bound that cut the questions short")
    left_out = serializers.DictField(allow_null=True, help_text=(
        "pending jobs not asked about: past NUMAWEB_DEFRAG_MAX_JOBS, or more pods than NUMAWEB_MAKE_ROOM_MAX_PODS"))


def _defrag_body(row: DefragRun, request: Request) -> dict:
    data = defrag.defrag_dict(row)
    data["url"] = reverse("api:defrag-detail", args=[row.pk], request=request)
    data["page"] = request.build_absolute_uri(reverse("room:defrag", args=[row.pk]))
    return data


class DefragView(APIView):
    """Rank a cluster's pending jobs by the moves each needs, and propose a set that places the most."""

    required_permissions = {"post": ["room.add_defragrun"]}  # operators (numaweb.access.drf)
    # JSON only: its lists (protected namespaces, pins) and options have no faithful form encoding
    parser_classes = [DepthLimitedJSONParser]

    @extend_schema(request=DefragRequestSerializer, responses={
        202: DefragSerializer, 400: FIELD_ERRORS, 401: ERROR, 403: ERROR, 404: ERROR, 429: ERROR, 503: ERROR})
    def post(self, request: Request, pk: int) -> Response:
        """202 with the run's URL; a worker answers it (progress on the URL)."""
        return _accepted(request, pk, defrag.parse_request, tasks.start_defrag, _defrag_body)


class DefragDetailView(APIView):
    queryset = DefragRun.objects.all()

    @extend_schema(responses={200: DefragSerializer, 401: ERROR, 403: ERROR, 404: ERROR})
    def get(self, request: Request, pk: int) -> Response:
        """The run's status and progress and, once done, the ranked jobs and the proposal."""
        row = get_object_or_404(DefragRun, pk=pk)
        defrag.ADVISOR.watch(row)
        return Response(_defrag_body(row, request))
