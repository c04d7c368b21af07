"""URLs of the comparison pages (namespace `comparisons`)."""

from django.urls import path

from . import views

app_name = "comparisons"

urlpatterns = [
    path("", views.comparison_list, name="list"),
    path("start", views.start, name="start"),
    path("<int:pk>/", views.detail, name="detail"),
]
