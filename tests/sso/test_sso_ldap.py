"""LDAP sign-on against a real slapd with a test directory: the login page's form, users made at the
first login, group mappings applied and withdrawn across logins (the user's chat sockets told), the
audit, deactivated accounts, and local passwords switched off."""
import ldap
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.test import Client

from chat import revocation
from conftest import configure
from sso import services as sso_services
from sso.models import GroupMapping, Source
from sso_servers import GROUPS_DN, PEOPLE_DN, SERVICE_DN, SERVICE_PASSWORD
from tenants import services
from tenants.models import AuditLog, Membership

SALES = f"cn=sales,{GROUPS_DN}"
ACME_ADMINS = f"cn=acme-admins,{GROUPS_DN}"
SUPPORT = f"cn=support,{GROUPS_DN}"


def ldap_env(slapd) -> dict[str, str]:
    """The PAGODA_LDAP_* variables for the test directory (as an IT team would set them)."""
    return {"PAGODA_LDAP_URI": slapd.uri, "PAGODA_LDAP_BIND_DN": SERVICE_DN, "PAGODA_LDAP_BIND_PASSWORD": SERVICE_PASSWORD,
            "PAGODA_LDAP_USER_SEARCH_BASE": PEOPLE_DN, "PAGODA_LDAP_GROUP_SEARCH_BASE": GROUPS_DN}


@pytest.fixture
def directory(settings, slapd):
    """Configures Pagoda for the test directory; yields set_member(group_dn, uid, present)."""
    configure(settings, ldap_env=ldap_env(slapd))
    conn = slapd.connection()
    changed = []

    def set_member(group_dn: str, uid: str, present: bool) -> None:
        op = ldap.MOD_ADD if present else ldap.MOD_DELETE
        conn.modify_s(group_dn, [(op, "member", [f"uid={uid},{PEOPLE_DN}".encode()])])
        changed.append((group_dn, uid, present))

    yield set_member
    for group_dn, uid, present in reversed(changed):  # the next test finds the directory as loaded
        conn.modify_s(group_dn, [(ldap.MOD_DELETE if present else ldap.MOD_ADD, "member",
                                  [f"uid={uid},{PEOPLE_DN}".encode()])])
    conn.unbind_s()


@pytest.fixture
def mappings(tenants):
    for group, slug, role in ((SALES, "acme", Membership.Role.MEMBER), (ACME_ADMINS, "acme", Membership.Role.ADMIN),
                              (SUPPORT, "globex", Membership.Role.MEMBER)):
        sso_services.save_mapping(GroupMapping(source=Source.LDAP, group=group, tenant=tenants[slug], role=role))


def login(username: str, password: str) -> Client:
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": password})
    client.ok = response.status_code == 302 and "_auth_user_id" in client.session
    return client


def roles(user) -> dict[str, str]:
    return dict(Membership.objects.filter(user=user).values_list("tenant__slug", "role"))


def test_first_login_creates_the_user_with_the_mapped_memberships(directory, mappings, tenants):
    client = login("alice", "alice-pw")
    assert client.ok
    alice = get_user_model().objects.get(username="alice")
    assert (alice.first_name, alice.last_name, alice.email) == ("Alice", "Park", "alice@example.test")
    assert not alice.has_usable_password()  # the directory checks the password, never a local copy
    # sales gives member, acme-admins gives admin in the same tenant: the higher role wins
    assert roles(alice) == {"acme": "admin", "globex": "member"}
    entry = AuditLog.objects.filter(action="sso.login").latest("id")
    assert entry.after["source"] == "ldap"
    assert {g.casefold() for g in entry.after["groups"]} == {SALES, ACME_ADMINS, SUPPORT}
    assert entry.after["granted"] == {"acme": "admin", "globex": "member"}
    assert client.get("/chat/").status_code in (200, 302)


def test_withdrawn_groups_remove_memberships_at_the_next_login(directory, mappings, tenants, transactional_db):
    assert login("alice", "alice-pw").ok
    alice = get_user_model().objects.get(username="alice")
    services.add_member(tenants["initech"], alice)  # a tenant no mapping names: the admins' business

    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(revocation.user_group(alice.pk), channel)

    directory(ACME_ADMINS, "alice", present=False)  # demoted in acme
    directory(SUPPORT, "alice", present=False)  # left support: globex withdrawn
    assert login("alice", "alice-pw").ok
    assert roles(alice) == {"acme": "member", "initech": "member"}
    # the removal went through the membership service: audited, and the user's sockets told to check
    assert AuditLog.objects.filter(action="membership.delete", object_repr__contains="Globex").exists()
    message = async_to_sync(layer.receive)(channel)
    assert message == {"type": revocation.MESSAGE_TYPE, "reason": "membership"}
    last = AuditLog.objects.filter(action="sso.login").latest("id").after
    assert (last["granted"], last["withdrawn"]) == ({"acme": "member"}, ["globex"])

    directory(SALES, "alice", present=False)
    assert login("alice", "alice-pw").ok  # still logs in, in no mapped tenant
    assert roles(alice) == {"initech": "member"}

    directory(SALES, "alice", present=True)
    directory(SUPPORT, "alice", present=True)
    assert login("alice", "alice-pw").ok
    assert roles(alice) == {"acme": "member", "globex": "member", "initech": "member"}


def test_wrong_password_unknown_user_and_deactivated_account_are_refused(directory, mappings):
    assert not login("alice", "not-her-password").ok
    assert not login("nobody", "x").ok
    assert not get_user_model().objects.filter(username="nobody").exists()
    assert login("bob", "bob-pw").ok
    bob = get_user_model().objects.get(username="bob")
    bob.is_active = False
    bob.save()
    client = Client()
    response = client.post("/accounts/login/", {"username": "bob", "password": "bob-pw"})
    assert response.status_code == 200 and "_auth_user_id" not in client.session
    assert "didn" in response.content.decode()  # the login page's error, not a crash


def test_local_passwords_can_be_switched_off(settings, slapd, directory, mappings, django_user_model):
    django_user_model.objects.create_user("local-only", password="local-pw")
    assert login("local-only", "local-pw").ok
    configure(settings, ldap_env=ldap_env(slapd), password_login=False)
    assert not login("local-only", "local-pw").ok
    assert login("alice", "alice-pw").ok  # the directory still checks passwords on the same form


def test_mapping_changes_in_the_admin_are_audited(admin_client, tenants):
    response = admin_client.post("/admin/sso/groupmapping/add/", {
        "source": "ldap", "group": f"  {SALES} ", "tenant": tenants["acme"].pk, "role": "member"})
    assert response.status_code == 302, response.content.decode()[:2000]
    mapping = GroupMapping.objects.get()
    assert mapping.group == SALES
    created = AuditLog.objects.get(action="sso_mapping.create")
    assert created.after["group"] == SALES and created.tenant == tenants["acme"]
    admin_client.post(f"/admin/sso/groupmapping/{mapping.pk}/change/", {
        "source": "ldap", "group": SALES, "tenant": tenants["acme"].pk, "role": "admin"})
    updated = AuditLog.objects.get(action="sso_mapping.update")
    assert (updated.before["role"], updated.after["role"]) == ("member", "admin")
    admin_client.post(f"/admin/sso/groupmapping/{mapping.pk}/delete/", {"post": "yes"})
    assert not GroupMapping.objects.exists()
    assert AuditLog.objects.get(action="sso_mapping.delete").before["role"] == "admin"


def test_an_invitation_by_email_applies_at_the_first_directory_login(directory, tenants):
    from people import services as people

    people.invite(tenants["acme"], email="ALICE@example.test", role=Membership.Role.ADMIN)
    assert login("alice", "alice-pw").ok
    alice = get_user_model().objects.get(username="alice")
    assert roles(alice) == {"acme": "admin"}  # pre-provisioned: no mapping names acme here
    entry = AuditLog.objects.get(action="invitation.accept")
    assert entry.actor == alice and entry.after["how"] == "single sign-on"
    assert AuditLog.objects.filter(action="sso.login").latest("id").after["granted"] == {"acme": "admin"}
