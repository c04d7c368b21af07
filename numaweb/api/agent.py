"""`POST /api/agent/reports/`: a node agent's report (scheduler_core/agent), applied by
`numaweb.inventory.agent.apply_report`: whole or not at all; an unchanged report writes nothing."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from numaweb.access.roles import AGENT_PERMISSIONS
from numaweb.inventory import agent
from numaweb.inventory.services import AllocationConflict

from .serializers import Conflict


class NodeReportSerializer(serializers.Serializer):
    """A node agent's report (documentation; every part is checked by inventory.agent.parse, which names it)."""

    kind = serializers.ChoiceField(choices=["numaweb.node-report/1"])
    cluster = serializers.CharField(help_text="the cluster's name; an agent token may name only its own")
    node = serializers.CharField(help_text="the node's name (DNS-1123 subdomain)")
    time = serializers.DateTimeField(help_text="when the agent read the node")
    agent = serializers.JSONField(required=False, help_text="the agent's version and host")
    topology = serializers.JSONField(help_text="the engine's topology JSON (numaweb.topology)")
    pci_devices = serializers.ListField(child=serializers.JSONField(), required=False)
    kubelet = serializers.JSONField(help_text="config, cpu_manager_state, memory_manager_state, device_checkpoint: "
                                              "each the file's text, or null")
    notes = serializers.ListField(child=serializers.CharField(), required=False)


ANSWER = inline_serializer("NodeReportAnswer", {
    "node": serializers.IntegerField(), "name": serializers.CharField(), "cluster": serializers.IntegerField(),
    "changed": serializers.BooleanField(help_text="false: the same as the last report, nothing written"),
    "created": serializers.BooleanField(), "generation": serializers.IntegerField(),
    "observed": serializers.IntegerField(help_text="allocations with origin observed written"),
    "released": serializers.ListField(child=serializers.CharField()),
    "notes": serializers.ListField(child=serializers.CharField()),
    "check": serializers.JSONField(allow_null=True, help_text="the state check: verdict, match, disagreements"),
})


class NodeReportView(APIView):
    required_permissions = {"post": list(AGENT_PERMISSIONS)}
    throttle_classes: list = []  # limited per node by the report's own row (inventory.agent.ReportTooSoon)

    @extend_schema(request=NodeReportSerializer, responses={
        200: ANSWER, 201: ANSWER,
        409: OpenApiResponse(OpenApiTypes.OBJECT, description="a pod of the checkpoints clashes with a holder"),
    }, summary="Send a node agent's report")
    def post(self, request: Request) -> Response:
        try:
            outcome = agent.apply_report(request.data, request.user)
        except agent.ReportRefused as exc:
            raise ValidationError({exc.field: [str(exc)]}) from exc
        except agent.ReportForbidden as exc:
            raise PermissionDenied(str(exc)) from exc
        except agent.ReportTooSoon as exc:
            raise Throttled(wait=exc.wait, detail=str(exc)) from exc
        except AllocationConflict as exc:
            raise Conflict(exc) from exc
        return Response(outcome.to_dict(), status=status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK)
