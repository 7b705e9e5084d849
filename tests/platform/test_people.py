"""Tenant admins managing their own people in the console (/console/<slug>/people/): invitations by link
and by single sign-on, role changes, offboarding (deactivate when this tenant is all a person belongs
to, else remove), every change audited, and nothing of another tenant reachable."""
import datetime
import re

import pytest
from django.core.exceptions import ValidationError
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from people import services as people
from people.models import Invitation
from sso.mapping import apply_group_mappings
from sso.models import Source
from tenants import services
from tenants.models import AuditLog, Membership

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _invite_link(client, slug: str, **data) -> str:
    response = client.post(f"/console/{slug}/people/invite/", {"role": "member", **data}, follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    return re.search(r"http://testserver(/accounts/invitation/[^/]+/)", page).group(1)


def test_the_people_page_lists_this_tenants_members_only(tenant, other_tenant, tenant_admin, member, make_user):
    outsider = make_user("otto", email="otto@globex.example")
    services.add_member(other_tenant, outsider)
    page = _client(tenant_admin).get("/console/acme/people/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-username="bob"' in html and 'data-username="ann"' in html
    assert "otto" not in html and "Globex" not in html
    assert _client(tenant_admin).get("/console/globex/people/").status_code == 404
    assert _client(member).get("/console/acme/people/").status_code == 404  # members are not admins


def test_nothing_of_another_tenant_is_reachable(tenant, other_tenant, tenant_admin, make_user):
    outsider = make_user("otto")
    theirs = services.add_member(other_tenant, outsider)
    invitation, _ = people.invite(other_tenant, email="x@globex.example")
    client = _client(tenant_admin)
    for url in (f"/console/acme/people/{theirs.pk}/offboard/", f"/console/acme/people/{theirs.pk}/role/",
                f"/console/acme/people/{theirs.pk}/reactivate/", f"/console/globex/people/{theirs.pk}/offboard/",
                f"/console/acme/people/invitations/{invitation.pk}/revoke/", "/console/globex/people/invite/"):
        assert client.post(url, {"role": "admin", "email": "x@y.example"}).status_code == 404, url
    outsider.refresh_from_db()
    theirs.refresh_from_db()
    assert outsider.is_active and theirs.role == "member" and Invitation.objects.filter(pk=invitation.pk).exists()


def test_an_invitation_link_makes_a_new_account_and_a_member(tenant, tenant_admin, client):
    path = _invite_link(_client(tenant_admin), "acme", email="Dana@Acme.example", role="admin")
    page = client.get(path)
    assert page.status_code == 200 and "Join Acme" in page.content.decode()
    weak = client.post(path, {"username": "dana", "email": "dana@acme.example", "password1": "x", "password2": "x"})
    assert weak.status_code == 400 and not Membership.objects.filter(user__username="dana").exists()
    done = client.post(path, {"username": "dana", "email": "dana@acme.example",
                              "password1": "a long passphrase 77", "password2": "a long passphrase 77"})
    assert done.status_code == 302 and done["Location"] == "/chat/"
    membership = Membership.objects.get(user__username="dana")
    assert membership.tenant == tenant and membership.role == "admin"
    assert client.get("/chat/").status_code == 200  # logged in by the link
    assert client.get(path).status_code == 404  # used once
    actions = list(AuditLog.objects.order_by("id").values_list("action", "actor_repr"))
    assert ("invitation.create", "ann") in actions and ("invitation.accept", "dana") in actions
    assert ("user.create", "dana") in actions and ("membership.create", "dana") in actions
    invitation = Invitation.objects.get()
    assert invitation.email == "dana@acme.example" and invitation.accepted_by.username == "dana"
    assert len(invitation.token_hash) == 64 and invitation.token_hash not in path  # only the hash is stored


def test_someone_with_an_account_joins_with_it(tenant, other_tenant, tenant_admin, make_user):
    erin = make_user("erin")
    services.add_member(other_tenant, erin)
    path = _invite_link(_client(tenant_admin), "acme", email="erin@globex.example")
    erins = _client(erin)
    assert "Join as erin" in erins.get(path).content.decode()
    assert erins.post(path).status_code == 302
    assert set(erin.memberships.values_list("tenant__slug", flat=True)) == {"acme", "globex"}


def test_expired_withdrawn_and_unknown_links_are_refused(tenant, tenant_admin, client):
    path = _invite_link(_client(tenant_admin), "acme", username="fred")
    Invitation.objects.update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    assert client.get(path).status_code == 404
    assert "unknown, was already used, or has expired" in client.get(path).content.decode()
    assert client.get("/accounts/invitation/nonsense/").status_code == 404
    path = _invite_link(_client(tenant_admin), "acme", username="gina")
    invitation = Invitation.objects.get(username="gina")
    assert _client(tenant_admin).post(f"/console/acme/people/invitations/{invitation.pk}/revoke/").status_code == 302
    assert client.get(path).status_code == 404
    assert AuditLog.objects.filter(action="invitation.revoke", actor_repr="ann").exists()


def test_an_invitation_needs_an_email_or_a_username(tenant, tenant_admin):
    response = _client(tenant_admin).post("/console/acme/people/invite/", {"role": "member"})
    assert response.status_code == 400 and not Invitation.objects.exists()


def test_single_sign_on_takes_up_invitations_by_email_or_username(tenant, other_tenant, make_user):
    people.invite(tenant, email="hana@corp.example", role="admin")
    people.invite(other_tenant, username="HANA")
    people.invite(other_tenant, email="someone.else@corp.example")
    hana = make_user("hana", email="Hana@corp.example")
    result = apply_group_mappings(hana, Source.LDAP, [])
    assert result.granted == {"acme": "admin", "globex": "member"}
    assert dict(hana.memberships.values_list("tenant__slug", "role")) == {"acme": "admin", "globex": "member"}
    assert Invitation.objects.filter(accepted_at=None).count() == 1
    assert AuditLog.objects.filter(action="invitation.accept", after__how="single sign-on").count() == 2
    apply_group_mappings(hana, Source.LDAP, [])  # used: nothing again
    assert AuditLog.objects.filter(action="invitation.accept").count() == 2


def test_roles_change_and_are_audited_but_not_ones_own(tenant, tenant_admin, member):
    client = _client(tenant_admin)
    membership = Membership.objects.get(user=member, tenant=tenant)
    assert client.post(f"/console/acme/people/{membership.pk}/role/", {"role": "admin"}).status_code == 302
    membership.refresh_from_db()
    assert membership.role == "admin"
    entry = AuditLog.objects.get(action="membership.update")
    assert entry.actor == tenant_admin and entry.before["role"] == "member" and entry.after["role"] == "admin"
    own = Membership.objects.get(user=tenant_admin, tenant=tenant)
    response = client.post(f"/console/acme/people/{own.pk}/role/", {"role": "member"}, follow=True)
    assert "cannot change your own membership" in response.content.decode()
    own.refresh_from_db()
    assert own.role == "admin"


def test_offboarding_someone_of_this_tenant_only_deactivates_the_account(tenant, tenant_admin, member):
    members_browser = _client(member)
    membership = Membership.objects.get(user=member, tenant=tenant)
    page = _client(tenant_admin).get("/console/acme/people/").content.decode()
    assert "Deactivate account" in page
    response = _client(tenant_admin).post(f"/console/acme/people/{membership.pk}/offboard/", follow=True)
    assert "bob: deactivated" in response.content.decode()
    member.refresh_from_db()
    assert not member.is_active
    assert Membership.objects.filter(pk=membership.pk).exists()  # listed, to be reactivated
    assert not Session.objects.filter(session_key=members_browser.session.session_key).exists()  # ended
    assert members_browser.get("/chat/").status_code == 302
    entry = AuditLog.objects.get(action="user.deactivate")
    assert entry.actor == tenant_admin and entry.after["num_sessions_ended"] == 1
    assert _client(tenant_admin).post(f"/console/acme/people/{membership.pk}/reactivate/").status_code == 302
    member.refresh_from_db()
    assert member.is_active and AuditLog.objects.filter(action="user.activate", actor_repr="ann").exists()


def test_offboarding_someone_of_other_tenants_too_removes_them_from_this_one(tenant, other_tenant, tenant_admin,
                                                                              member, make_user):
    services.add_member(other_tenant, member)
    root_like = make_user("ops", is_staff=True)
    services.add_member(tenant, root_like)
    page = _client(tenant_admin).get("/console/acme/people/").content.decode()
    assert page.count("Remove from Acme") == 2 and "Deactivate account" not in page
    for user in (member, root_like):
        membership = Membership.objects.get(user=user, tenant=tenant)
        assert _client(tenant_admin).post(f"/console/acme/people/{membership.pk}/offboard/").status_code == 302
        user.refresh_from_db()
        assert user.is_active and not Membership.objects.filter(pk=membership.pk).exists()
    assert Membership.objects.filter(user=member, tenant=other_tenant).exists()
    assert AuditLog.objects.filter(action="membership.delete", actor_repr="ann").count() == 2
    both = make_user("ivy", is_active=False)  # deactivated by a Pagoda administrator
    services.add_member(other_tenant, both)
    with pytest.raises(ValidationError, match="other tenants too"):
        people.reactivate(services.add_member(tenant, both), actor=tenant_admin)
    both.refresh_from_db()
    assert not both.is_active


def test_an_admin_cannot_offboard_themselves(tenant, tenant_admin):
    own = Membership.objects.get(user=tenant_admin, tenant=tenant)
    _client(tenant_admin).post(f"/console/acme/people/{own.pk}/offboard/")
    tenant_admin.refresh_from_db()
    assert tenant_admin.is_active and Membership.objects.filter(pk=own.pk).exists()


def test_an_unverified_email_takes_up_no_invitation(tenant, make_user):
    from sso.oidc import email_verified

    people.invite(tenant, email="kai@corp.example")
    kai = make_user("kai", email="kai@corp.example")
    assert not email_verified({"email_verified": False}) and not email_verified({"email_verified": "false"})
    assert email_verified({}) and email_verified({"email_verified": True})
    apply_group_mappings(kai, Source.OIDC, [], email_verified=False)
    assert not kai.memberships.exists()
    apply_group_mappings(kai, Source.OIDC, [], email_verified=True)
    assert kai.memberships.get().tenant == tenant
