"""`GET /api/pods/?q=&cluster=&limit=`: find any pod by pod, job or namespace name
(numaweb.scheduling.pod_search); `status=rejected[&reason=&node=]`: the pods the kubelet rejected
(numaweb.inventory.rejected), each with its explanation and remedies. A search without `status` lists
the rejected pods matching `q` after the others. `misaligned=true` (or `false`): the pods using DRA devices
whose devices are (or are not) off the NUMA nodes of their pinned CPUs or memory, as the import judged them.
Every pod row carries `alignment` ({"aligned", "kinds"})."""

from __future__ import annotations

from django.http import QueryDict
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from numaweb.inventory import rejected
from numaweb.inventory.models import Cluster, RejectedPod
from numaweb.scheduling.pod_search import ALIGNED, PodMatch, find_aligned, find_pods

MAX_LIMIT = 500


def search_params(params: QueryDict) -> tuple[str, int | None, int]:
    """(query, cluster id or None, limit) from query parameters; ValidationError naming the field. An empty
    or absent `q` is contained in every name: every pod matches (the first `limit` are returned)."""
    query = (params.get("q") or "").strip()
    limit = _whole(params, "limit", MAX_LIMIT)
    return query, _whole(params, "cluster", 2**63 - 1), 50 if limit is None else limit


def _whole(params: QueryDict, name: str, top: int) -> int | None:
    """The parameter as a whole number from 1 to `top`, None when absent (an empty value is refused, as the
    schema's integer is); ValidationError naming it."""
    raw = params.get(name)
    if raw is None:
        return None
    # isdigit() alone takes "²", which int() refuses
    if not (raw.isascii() and raw.isdigit()) or not 0 < int(raw) <= top:
        raise ValidationError({name: [f"must be a whole number from 1 to {top}, not {raw!r}"]})
    return int(raw)


class PodSearchView(APIView):
    """Pods whose namespace/name contains `q` (a job's pods carry its name): where each is held (node, NUMA
    nodes, CPUs, memory per NUMA node, devices), who wrote it, and its latest session placement."""

    @extend_schema(parameters=[
        OpenApiParameter("q", {"type": "string", "maxLength": 512},
                         description="part of a pod, job or namespace name (omitted or empty: every pod)"),
        OpenApiParameter("status", OpenApiTypes.STR, enum=["rejected"],
                         description="rejected: only the pods the kubelet rejected, with explanation and remedies"),
        OpenApiParameter("reason", OpenApiTypes.STR, enum=list(rejected.KUBELET_REJECTIONS),
                         description="with status=rejected: the kubelet's reason"),
        OpenApiParameter("node", {"type": "string", "maxLength": 512},
                         description="with status=rejected: the node's name"),
        OpenApiParameter("misaligned", OpenApiTypes.STR, enum=["true", "false"],
                         description="true: only the pods whose DRA devices sit off the NUMA nodes of their pinned "
                                     "CPUs or memory (each row's alignment.kinds says which); false: the pods using "
                                     "DRA devices that are aligned. `q` is then optional"),
        OpenApiParameter("cluster", {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
                         description="only this cluster's pods (an unknown id: none)"),
        OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                         description=f"matches returned (default 50, at most {MAX_LIMIT})"),
    ], responses={200: inline_serializer("PodSearch", {
        "count": serializers.IntegerField(help_text="every match"),
        "results": serializers.ListField(child=serializers.DictField())}), 400: OpenApiResponse(OpenApiTypes.OBJECT)})
    def get(self, request: Request) -> Response:
        params = request.query_params
        status = params.get("status")
        if status is not None and status != "rejected":
            raise ValidationError({"status": [f'the one status filtered on is "rejected", not {status!r}']})
        reason = params.get("reason")
        if reason is not None and reason not in rejected.KUBELET_REJECTIONS:
            raise ValidationError({"reason": [f"one of {', '.join(rejected.KUBELET_REJECTIONS)}, not {reason!r}"]})
        for name in ("node", "q"):
            if len(params.get(name) or "") > 512:
                raise ValidationError({name: ["at most 512 characters"]})
        misaligned = params.get("misaligned")
        if misaligned is not None and misaligned not in ("true", "false"):
            raise ValidationError({"misaligned": [f"true or false, not {misaligned!r}"]})
        if status == "rejected":
            if misaligned is not None:  # a rejected pod holds no device: none is misaligned, none aligned
                return Response({"count": 0, "results": []})
            return self._rejected(request)
        if misaligned is not None:
            return self._aligned(request, misaligned == "true")
        query, cluster, limit = search_params(params)
        count, matches = find_pods(query, cluster, limit)
        results = [_pod_row(m, request) for m in matches]
        found = rejected.rejected_pods(cluster, query=query)
        extra = found.count()
        results += [_rejected_row(p, request) for p in found[:max(0, limit - len(results))]]
        return Response({"count": count + extra, "results": results})

    def _aligned(self, request: Request, misaligned: bool) -> Response:
        """The pods using DRA devices, misaligned or aligned, filtered by cluster and `q`."""
        params = request.query_params
        limit = _whole(params, "limit", MAX_LIMIT) or 50
        cluster = _whole(params, "cluster", 2**63 - 1)  # an unknown id matches nothing, as in every pod list
        query = (params.get("q") or "").strip()
        count, matches = find_aligned(cluster, misaligned, query, limit)
        return Response({"count": count, "results": [_pod_row(m, request) for m in matches]})

    def _rejected(self, request: Request) -> Response:
        """The rejected pods, filtered by cluster, reason, node name and `q`."""
        params = request.query_params
        limit = _whole(params, "limit", MAX_LIMIT) or 50
        cluster = _whole(params, "cluster", 2**63 - 1)
        reason = params.get("reason") or ""
        node = (params.get("node") or "").strip()
        query = (params.get("q") or "").strip()
        rows = rejected.rejected_pods(cluster, reason, node, query)
        return Response({"count": rows.count(), "results": [_rejected_row(p, request) for p in rows[:limit]]})


def _pod_row(match: PodMatch, request: Request) -> dict:
    row = match.to_dict()
    if row["node"]:
        row["node"]["url"] = reverse("api:node-detail", args=[row["node"]["id"]], request=request)
    if row["last_placement"]:
        p = row["last_placement"]
        p["hint_table"] = request.build_absolute_uri(
            f"{reverse('pages:session', args=[p['session']])}?pod={p['index']}#hint-table")
    if row["dra"]:
        row["dra"]["url"] = request.build_absolute_uri(reverse("pages:pod-alignment", args=[row["dra"]["id"]]))
    return row


def _rejected_row(pod: RejectedPod, request: Request) -> dict:
    row = rejected.as_row(pod)
    row["alignment"] = dict(ALIGNED)  # it holds nothing: no device was prepared for it
    row["node"]["url"] = reverse("api:node-detail", args=[pod.node_id], request=request)
    row["url"] = request.build_absolute_uri(reverse("pages:rejected-pod", args=[pod.pk]))
    return row


class RejectedSummaryView(APIView):
    """The cluster-wide view of the pods its kubelets rejected: counts by reason, by node class and by the
    resource each explanation names, with how many pods each kind of remedy was found for."""

    @extend_schema(responses={200: inline_serializer("RejectedSummary", {
        "rejected": serializers.IntegerField(), "not_reproduced": serializers.IntegerField(),
        "remedies": serializers.DictField(child=serializers.IntegerField()),
        "by_reason": serializers.ListField(child=serializers.DictField()),
        "by_node_class": serializers.ListField(child=serializers.DictField()),
        "by_resource": serializers.ListField(child=serializers.DictField())})})
    def get(self, request: Request, pk: int) -> Response:
        return Response(rejected.summary(get_object_or_404(Cluster, pk=pk)))
