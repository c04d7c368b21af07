"""URLs of every page: `urlpatterns` (namespace `pages`; the dashboard is also the site's home), and the
comparison and make-room pages under their own prefixes and namespaces (`comparisons`, `room`), which
`numaweb.urls` includes."""

from django.urls import path

from .views import comparisons, dashboard, jobs, nodes, rejected, room, sessions

app_name = "pages"

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("nodes/<int:pk>/", nodes.node_detail, name="node"),
    path("nodes/<int:pk>/what-if", nodes.node_whatif, name="node-whatif"),
    path("nodes/<int:pk>/cpu", nodes.cpu_detail, name="node-cpu"),
    path("nodes/<int:pk>/check-state", nodes.node_check_state, name="node-check-state"),
    path("nodes/<int:pk>/kubelet-config", nodes.node_kubelet_config, name="node-kubelet-config"),
    path("pods/", dashboard.pod_search, name="pods"),
    path("help/", dashboard.help_page, name="help"),
    path("clusters/<int:pk>/map", nodes.cluster_map_page, name="cluster-map"),
    path("clusters/import", nodes.cluster_import, name="cluster-import"),
    path("clusters/<int:pk>/rejected", rejected.cluster_rejected, name="cluster-rejected"),
    path("rejected/<int:pk>/", rejected.rejected_pod, name="rejected-pod"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/<int:pk>/", jobs.job_detail, name="job"),
    path("jobs/<int:pk>/finish", jobs.job_finish, name="job-finish"),
    path("sessions/", sessions.session_list, name="sessions"),
    path("sessions/start", sessions.session_start, name="session-start"),
    path("sessions/<int:pk>/", sessions.session_detail, name="session"),
    path("sessions/<int:pk>/progress", sessions.session_progress, name="session-progress"),
    path("sessions/<int:pk>/pods/<int:index>/", sessions.session_pod, name="session-pod"),
    path("sessions/<int:pk>/pods/<int:index>/hints", sessions.session_hints, name="session-hints"),
]

# (patterns, namespace) pairs for include(): the URL names stay `comparisons:…` and `room:…`
comparison_urls = ([
    path("", comparisons.comparison_list, name="list"),
    path("start", comparisons.start, name="start"),
    path("<int:pk>/", comparisons.detail, name="detail"),
    path("<int:pk>/strips/<int:index>", comparisons.strip, name="strip"),
], "comparisons")

room_urls = ([
    path("start", room.start, name="start"),
    path("<int:pk>/", room.detail, name="detail"),
    path("queue/start", room.defrag_start, name="defrag-start"),
    path("queue/<int:pk>/", room.defrag_detail, name="defrag"),
], "room")
