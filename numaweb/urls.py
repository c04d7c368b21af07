"""URL map: the pages (numaweb.pages.urls; the dashboard is home), login and logout, the admin, the REST API
(numaweb.api.urls) and its offline docs, and the project's own endpoints (health, metrics, the 404)."""

from django.contrib import admin
from django.contrib.auth import views as auth
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerSplitView

from numaweb.api.schema import SchemaView
from numaweb.pages import urls as pages
from numaweb.pages.views import dashboard

from . import faults, metrics, views

handler404 = views.not_found
handler500 = faults.server_error

urlpatterns = [
    path("", dashboard.dashboard, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("login/", auth.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    # the OpenAPI document, generated once per process (numaweb.api.schema.SchemaView)
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    # Swagger UI with its start-up script served as a file (no inline script under the Content-Security-Policy);
    # no ReDoc: it injects inline styles
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("numaweb.api.urls")),
    path("comparisons/", include(pages.comparison_urls)),
    path("make-room/", include(pages.room_urls)),
    path("", include(pages)),
]
