import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from api import selectors as api_selectors
from api.models import ApiKey
from tenants import selectors
from tenants.models import AuditLog, Membership, Tenant

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_bootstrap_creates_admin_and_demo_tenant_once(settings):
    settings.PAGODA_ADMIN_USER, settings.PAGODA_ADMIN_PASSWORD = "boss", "admin"
    out, _ = run("bootstrap")
    assert "Created superuser 'boss'" in out and "WARNING" in out and "changepassword boss" in out
    boss = get_user_model().objects.get(username="boss")
    assert boss.is_superuser and boss.check_password("admin")
    demo = Tenant.objects.get(slug="demo")
    assert selectors.active_system_prompt(demo) is not None
    assert selectors.is_tenant_admin(boss, demo) and {p.name for p in selectors.profiles(demo)} == {"chat", "coding"}

    out, _ = run("bootstrap")
    assert "not creating" in out
    assert get_user_model().objects.count() == 1 and Tenant.objects.count() == 1


def test_bootstrap_leaves_existing_setups_alone(superuser, tenant):
    out, _ = run("bootstrap")
    assert get_user_model().objects.filter(is_superuser=True).count() == 1
    assert not Tenant.objects.filter(slug="demo").exists()


def test_create_tenant_command():
    out, _ = run("create_tenant", "sales", "--name", "Sales Team")
    assert "chat (default), coding" in out
    assert Tenant.objects.get(slug="sales").name == "Sales Team"
    with pytest.raises(CommandError, match="slug"):
        run("create_tenant", "sales")
    out, _ = run("create_tenant", "sales", "--exist-ok")
    assert "already exists" in out


def test_add_member_command(tenant):
    with pytest.raises(CommandError, match="--create"):
        run("add_member", "acme", "zoe")
    run("add_member", "acme", "zoe", "--create", "--password", "s3cret", "--role", "admin")
    zoe = get_user_model().objects.get(username="zoe")
    assert zoe.check_password("s3cret")
    assert Membership.objects.get(user=zoe, tenant=tenant).role == "admin"
    with pytest.raises(CommandError, match="no tenant"):
        run("add_member", "nope", "zoe")


def test_set_system_prompt_command(tenant, tmp_path):
    out, _ = run("set_system_prompt", "acme", "--text", "Be helpful.")
    assert "version 1" in out and "active" in out
    path = tmp_path / "prompt.txt"
    path.write_text("한국어로 답하세요.", encoding="utf-8")
    run("set_system_prompt", "acme", "--file", str(path), "--note", "korean")
    assert selectors.active_system_prompt(tenant).text == "한국어로 답하세요."
    run("set_system_prompt", "acme", "--rollback", "1")
    assert selectors.active_system_prompt(tenant).version == 1
    out, _ = run("set_system_prompt", "acme", "--list")
    assert "* v1" in out and "  v2" in out
    run("set_system_prompt", "acme", "--deactivate")
    assert selectors.active_system_prompt(tenant) is None
    with pytest.raises(CommandError, match="no version 7"):
        run("set_system_prompt", "acme", "--rollback", "7")
    with pytest.raises(CommandError, match="empty"):
        run("set_system_prompt", "acme", "--text", " ")
    assert AuditLog.objects.filter(tenant=tenant, action="system_prompt.create", actor=None).count() == 2


def test_create_api_key_prints_the_key_once(tenant):
    out, err = run("create_api_key", "acme", "wiki bot", "--rpm", "30", "--tpm", "1000")
    plaintext = out.strip()
    key = api_selectors.api_key_by_plaintext(plaintext)
    assert key is not None and (key.name, key.rpm_limit, key.tpm_limit) == ("wiki bot", 30, 1000)
    assert "not shown again" in err and plaintext not in err
    assert ApiKey.objects.count() == 1


def test_engine_stats_reports_unreachable_server_and_disabled_engine(no_engine):
    with pytest.raises(CommandError, match="cannot reach the server"):
        run("engine_stats", "--url", "http://127.0.0.1:9")
    with pytest.raises(CommandError, match="switched off"):
        run("engine_stats", "--local")
