"""URLs of the make-room pages (namespace `room`)."""

from django.urls import path

from . import views

app_name = "room"

urlpatterns = [
    path("start", views.start, name="start"),
    path("<int:pk>/", views.detail, name="detail"),
]
