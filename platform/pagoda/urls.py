"""URL map. Each app owns its prefix: /console/ (tenant console), /admin/, /accounts/ (login);
observability serves /health and /metrics at the root.

The chat app serves /chat/ (the home page: employees land in their chat); /i18n/setlang/ switches the
language (English / Korean); the API app mounts its NinjaAPI under /v1/.
"""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="chat:index", permanent=False), name="home"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("console/", include("console.urls")),
    path("", include("chat.urls")),  # /chat/ (the socket is chat.routing's /ws/chat/<id>/)
    path("i18n/", include("django.conf.urls.i18n")),  # set_language: the language switch
    path("v1/", include("api.urls")),  # the OpenAI-compatible API (schema at /v1/openapi.json)
    path("", include("observability.urls")),  # /health, /metrics
]

# A database that could not serve a page in time answers 503 + Retry-After, not the 500 page.
handler500 = "pagoda.unavailable.server_error"
