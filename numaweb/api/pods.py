"""`GET /api/pods/?q=&cluster=&limit=`: find any pod by pod, job or namespace name
(numaweb.scheduling.pod_search)."""

from __future__ import annotations

from django.http import QueryDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from numaweb.scheduling.pod_search import find_pods

MAX_LIMIT = 500


def search_params(params: QueryDict) -> tuple[str, int | None, int]:
    """(query, cluster id or None, limit) from query parameters; ValidationError naming the field."""
    query = (params.get("q") or "").strip()
    if not query:
        raise ValidationError({"q": ["a part of a pod's, job's or namespace's name is required"]})
    if len(query) > 512:
        raise ValidationError({"q": ["at most 512 characters"]})
    limit = _whole(params, "limit", MAX_LIMIT)
    return query, _whole(params, "cluster", 2**63 - 1), 50 if limit is None else limit


def _whole(params: QueryDict, name: str, top: int) -> int | None:
    """The parameter as a whole number from 1 to `top`, None when absent; ValidationError naming it."""
    raw = params.get(name)
    if not raw:
        return None
    # isdigit() alone takes "²", which int() refuses
    if not (raw.isascii() and raw.isdigit()) or not 0 < int(raw) <= top:
        raise ValidationError({name: [f"must be a whole number from 1 to {top}, not {raw!r}"]})
    return int(raw)


class PodSearchView(APIView):
    """Pods whose namespace/name contains `q` (a job's pods carry its name): where each is held (node, NUMA
    nodes, CPUs, memory per NUMA node, devices), who wrote it, and its latest session placement."""

    @extend_schema(parameters=[
        OpenApiParameter("q", OpenApiTypes.STR, required=True, description="part of a pod, job or namespace name"),
        OpenApiParameter("cluster", OpenApiTypes.INT, description="only this cluster's pods"),
        OpenApiParameter("limit", OpenApiTypes.INT, description=f"matches returned (default 50, at most {MAX_LIMIT})"),
    ], responses={200: inline_serializer("PodSearch", {
        "count": serializers.IntegerField(help_text="every match"),
        "results": serializers.ListField(child=serializers.DictField())}), 400: OpenApiResponse(OpenApiTypes.OBJECT)})
    def get(self, request: Request) -> Response:
        query, cluster, limit = search_params(request.query_params)
        count, matches = find_pods(query, cluster, limit)
        results = []
        for m in matches:
            row = m.to_dict()
            if row["node"]:
                row["node"]["url"] = reverse("api:node-detail", args=[row["node"]["id"]], request=request)
            if row["last_placement"]:
                p = row["last_placement"]
                p["hint_table"] = request.build_absolute_uri(
                    f"{reverse('pages:session', args=[p['session']])}?pod={p['index']}#hint-table")
            results.append(row)
        return Response({"count": count, "results": results})
