"""Mounted at the site root: /health and /metrics (the paths probes and Prometheus expect)."""
from django.urls import path

from observability import views

app_name = "observability"
urlpatterns = [
    path("health", views.health, name="health"),
    path("metrics", views.metrics_view, name="metrics"),
]
