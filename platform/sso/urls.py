"""/sso/: the OpenID Connect login redirect and callback (register the callback's absolute URL,
https://<host>/sso/oidc/callback/, as the redirect URI at the provider)."""
from django.urls import path

from sso import views

app_name = "sso"
urlpatterns = [
    path("oidc/login/", views.OidcLoginView.as_view(), name="oidc_login"),
    path("oidc/callback/", views.OidcCallbackView.as_view(), name="oidc_callback"),
]
