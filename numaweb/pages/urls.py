"""URLs of the pages (namespace `pages`); the dashboard is also the site's home."""

from django.urls import path

from . import views

app_name = "pages"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("nodes/<int:pk>/", views.node_detail, name="node"),
    path("nodes/<int:pk>/what-if", views.node_whatif, name="node-whatif"),
    path("nodes/<int:pk>/cpu", views.cpu_detail, name="node-cpu"),
    path("nodes/<int:pk>/check-state", views.node_check_state, name="node-check-state"),
    path("nodes/<int:pk>/kubelet-config", views.node_kubelet_config, name="node-kubelet-config"),
    path("pods/", views.pod_search, name="pods"),
    path("help/", views.help_page, name="help"),
    path("clusters/<int:pk>/map", views.cluster_map_page, name="cluster-map"),
    path("clusters/import", views.cluster_import, name="cluster-import"),
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/<int:pk>/", views.job_detail, name="job"),
    path("jobs/<int:pk>/finish", views.job_finish, name="job-finish"),
    path("sessions/", views.session_list, name="sessions"),
    path("sessions/start", views.session_start, name="session-start"),
    path("sessions/<int:pk>/", views.session_detail, name="session"),
    path("sessions/<int:pk>/progress", views.session_progress, name="session-progress"),
    path("sessions/<int:pk>/pods/<int:index>/", views.session_pod, name="session-pod"),
    path("sessions/<int:pk>/pods/<int:index>/hints", views.session_hints, name="session-hints"),
]
