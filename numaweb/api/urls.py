"""The API router (namespace "api")."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from . import agent, comparisons, pods, room, views
from .token import ObtainToken

app_name = "api"

router = DefaultRouter()
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("allocations", views.AllocationViewSet, basename="allocation")
router.register("jobs", views.JobViewSet, basename="job")
router.register("sessions", views.SessionViewSet, basename="session")
router.register("comparisons", comparisons.ComparisonViewSet, basename="comparison")

urlpatterns = [
    path("auth-token/", ObtainToken.as_view(), name="auth-token"),
    path("pods/", pods.PodSearchView.as_view(), name="pod-search"),
    path("agent/reports/", agent.NodeReportView.as_view(), name="agent-reports"),
    path("clusters/<int:pk>/rejected/", pods.RejectedSummaryView.as_view(), name="cluster-rejected"),
    path("clusters/<int:pk>/headroom/", comparisons.HeadroomView.as_view(), name="cluster-headroom"),
    path("clusters/<int:pk>/make-room/", room.MakeRoomView.as_view(), name="cluster-make-room"),
    path("make-room/<int:pk>/", room.MakeRoomDetailView.as_view(), name="make-room-detail"),
    path("make-room/<int:pk>/plan.json", room.MakeRoomPlanView.as_view(), name="make-room-plan-json"),
    path("make-room/<int:pk>/plan.sh", room.MakeRoomPlanView.as_view(script=True), name="make-room-plan-script"),
    path("clusters/<int:pk>/defrag/", room.DefragView.as_view(), name="cluster-defrag"),
    path("defrag/<int:pk>/", room.DefragDetailView.as_view(), name="defrag-detail"),
    # the export is a file: its URL ends in .json, without the router's trailing slash
    path("sessions/<int:pk>/explanation.json", views.SessionViewSet.as_view({"get": "explanation"}),
         name="session-explanation"),
    path("", include(router.urls)),
]
