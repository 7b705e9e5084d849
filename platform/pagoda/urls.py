"""URL map. Each app owns its prefix: /console/ (tenant console), /admin/, /accounts/ (login), /sso/ (single sign-on);
observability serves /health and /metrics at the root.

The chat app serves /chat/ (the home page: employees land in their chat); /i18n/setlang/ switches the
language (English / Korean); the API app mounts its NinjaAPI under /v1/.
"""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.http import HttpResponsePermanentRedirect
from django.urls import include, path, re_path, reverse
from django.views.generic import RedirectView

from tenants.authentication import ThrottledAuthenticationForm
# Admin pages of models that moved from the tenants app to the app that owns them: old links and
# bookmarks keep working.
MOVED_ADMIN_MODELS = {"conversation": "chat", "apikey": "api", "apiusage": "api"}


def moved_admin_page(request, model: str, rest: str) -> HttpResponsePermanentRedirect:
    url = f"{reverse('admin:index')}{MOVED_ADMIN_MODELS[model]}/{model}/{rest}"
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(f"{url}?{query}" if query else url)


urlpatterns = [
    path("", RedirectView.as_view(pattern_name="chat:index", permanent=False), name="home"),
    # Pages name the icon in <head>; clients that ask the root for it anyway get it too, not a 404.
    path("favicon.ico", RedirectView.as_view(url=static("console/favicon.svg"), permanent=True)),
    re_path(r"^admin/tenants/(?P<model>conversation|apikey|apiusage)/(?P<rest>.*)$", moved_admin_page),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(
        redirect_authenticated_user=True, authentication_form=ThrottledAuthenticationForm), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("sso/", include("sso.urls")),  # OpenID Connect login and callback
    path("", include("governance.urls")),  # /console/<slug>/budgets/ and usage.csv, /chat/export.json
    path("", include("people.urls")),  # /console/<slug>/people/, /accounts/invitation/<token>/
    path("console/", include("console.urls")),
    path("", include("chat.urls")),  # /chat/ (the socket is chat.routing's /ws/chat/<id>/)
    path("i18n/", include("django.conf.urls.i18n")),  # set_language: the language switch
    path("v1/", include("api.urls")),  # the OpenAI-compatible API (schema at /v1/openapi.json)
    path("", include("api.urls_root")),  # /tokenize, /detokenize (where vLLM serves them; also under /v1)
    path("", include("observability.urls")),  # /health, /metrics
]

# A database that could not serve a page in time answers 503 + Retry-After, not the 500 page.
handler500 = "pagoda.unavailable.server_error"
