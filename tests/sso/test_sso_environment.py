"""Single sign-on settings from the environment: off by default, a half-done configuration refused at
start with the missing variable, and the login backends in the order they are tried."""
import pytest

from sso import environment as sso_env


def test_off_unless_set():
    assert sso_env.oidc_settings({}) == {"PAGODA_OIDC_ENABLED": False}
    assert sso_env.ldap_settings({}) == {"PAGODA_LDAP_ENABLED": False}
    assert sso_env.authentication_backends(oidc=False, ldap=False, password_login=True) == [sso_env.PASSWORD_BACKEND]


def test_half_done_configurations_name_what_is_missing():
    with pytest.raises(sso_env.SsoConfigError, match="PAGODA_OIDC_TOKEN_ENDPOINT"):
        sso_env.oidc_settings({"PAGODA_OIDC_CLIENT_ID": "pagoda", "PAGODA_OIDC_ISSUER": "https://idp"})
    with pytest.raises(sso_env.SsoConfigError, match="PAGODA_LDAP_GROUP_SEARCH_BASE"):
        sso_env.ldap_settings({"PAGODA_LDAP_URI": "ldap://dc", "PAGODA_LDAP_USER_SEARCH_BASE": "ou=people"})
    with pytest.raises(sso_env.SsoConfigError, match="PAGODA_LDAP_GROUP_TYPE"):
        sso_env.ldap_settings({"PAGODA_LDAP_URI": "ldap://dc", "PAGODA_LDAP_USER_SEARCH_BASE": "ou=people",
                               "PAGODA_LDAP_GROUP_SEARCH_BASE": "ou=groups", "PAGODA_LDAP_GROUP_TYPE": "ad"})
    with pytest.raises(sso_env.SsoConfigError, match="nobody could log in"):
        sso_env.authentication_backends(oidc=False, ldap=False, password_login=False)


def test_pkce_is_always_on_and_active_directory_gets_its_filter():
    oidc = sso_env.oidc_settings({"PAGODA_OIDC_CLIENT_ID": "pagoda", **{n: "https://idp/x" for n in sso_env._OIDC_REQUIRED}})
    assert (oidc["OIDC_USE_PKCE"], oidc["OIDC_PKCE_CODE_CHALLENGE_METHOD"], oidc["OIDC_USE_NONCE"]) == (True, "S256", True)
    pytest.importorskip("ldap", reason="python-ldap is not installed (bash deploy/install_ldap.sh)")
    ldap = sso_env.ldap_settings({"PAGODA_LDAP_URI": "ldap://dc", "PAGODA_LDAP_USER_SEARCH_BASE": "ou=staff",
                                  "PAGODA_LDAP_GROUP_SEARCH_BASE": "ou=groups",
                                  "PAGODA_LDAP_GROUP_TYPE": "nestedActiveDirectory"})
    assert ldap["AUTH_LDAP_USER_SEARCH"].filterstr == "(sAMAccountName=%(user)s)"
    assert sso_env.authentication_backends(oidc=True, ldap=True, password_login=False) == [
        sso_env.LDAP_BACKEND, sso_env.OIDC_BACKEND]
