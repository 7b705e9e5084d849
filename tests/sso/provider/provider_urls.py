"""The provider's pages: /o/ (django-oauth-toolkit: authorize, token, userinfo, JWKS, discovery), a login
page, and /bad/<kind>/token/: the real token endpoint whose ID token is then spoiled on purpose
(tampered_token), so the tests can show that Pagoda refuses each kind."""
import json
import time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import Http404
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.views import TokenView

KINDS = ("wrong-key", "wrong-audience", "expired")


def tampered_token(id_token: str, kind: str) -> str:
    """The same ID token, signed with another key, issued to another client, or expired an hour ago."""
    header = jwt.get_unverified_header(id_token)
    claims = jwt.decode(id_token, options={"verify_signature": False})
    key = settings.OAUTH2_PROVIDER["OIDC_RSA_PRIVATE_KEY"]
    if kind == "wrong-key":
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        key = other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
    elif kind == "wrong-audience":
        claims["aud"] = "another-application"
    elif kind == "expired":
        claims["iat"], claims["exp"] = int(time.time()) - 7200, int(time.time()) - 3600
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": header["kid"]})


@csrf_exempt
def bad_token(request, kind: str):
    if kind not in KINDS:
        raise Http404(kind)
    response = TokenView.as_view()(request)
    if response.status_code == 200:
        body = json.loads(response.content)
        body["id_token"] = tampered_token(body["id_token"], kind)
        response.content = json.dumps(body).encode()
    return response


urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("bad/<str:kind>/token/", bad_token),
]
