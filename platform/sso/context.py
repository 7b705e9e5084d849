"""What the login page offers: the single sign-on button and whether the password form is shown."""
from django.conf import settings


def login_options(request) -> dict:
    ldap = getattr(settings, "PAGODA_LDAP_ENABLED", False)
    oidc = getattr(settings, "PAGODA_OIDC_ENABLED", False)
    return {
        "sso_oidc_label": settings.PAGODA_OIDC_BUTTON_LABEL if oidc else "",
        # a username and password are asked for when local passwords or the directory may check them
        "sso_password_form": ldap or getattr(settings, "PAGODA_PASSWORD_LOGIN", True),
    }
