"""URL map. Each app owns its prefix: /console/ (tenant console), /admin/, /accounts/ (login);
observability serves /health and /metrics at the root.

The chat app adds `path("", include("chat.urls"))`; the API app mounts its NinjaAPI under /v1/.
"""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="console:index", permanent=False), name="home"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("console/", include("console.urls")),
    path("v1/", include("api.urls")),  # the OpenAI-compatible API (schema at /v1/openapi.json)
    path("", include("observability.urls")),  # /health, /metrics
]
