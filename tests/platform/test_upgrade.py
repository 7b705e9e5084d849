"""Upgrading a database made while the tenants app held every table: on PostgreSQL and on SQLite, every
row of the tables that moved to chat and api is still there and reads through the new models.

Each backend runs upgrade_check.py in its own process on an empty database, so the run's own test
database (and its migration state) is not involved.
"""
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("upgrade_check.py")
MOVED = {"Conversation": "chat", "Message": "chat", "ApiKey": "api", "ApiUsage": "api"}


def _postgres_admin_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        url = "postgresql://postgres@127.0.0.1:5432/postgres"
    return urlparse(url)._replace(scheme="postgresql", path="/postgres", query="").geturl()


@pytest.fixture
def empty_database(request, tmp_path):
    """DATABASE_URL of an empty database of the backend named by the test's parameter."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.sqlite3'}"
        return
    psycopg = pytest.importorskip("psycopg")
    admin_url = _postgres_admin_url()
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {admin_url}: {exc}")
    name = f"pagoda_upgrade_{os.getpid()}_{secrets.token_hex(3)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlparse(admin_url)._replace(scheme="postgres", path=f"/{name}").geturl()
    finally:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_check(database_url: str, tmp_path: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAGODA_", "DJANGO_"))}
    env.update({"DATABASE_URL": database_url, "PAGODA_ENGINE": "off", "PAGODA_VAR_DIR": str(tmp_path / "var"),
                "DJANGO_SETTINGS_MODULE": "pagoda.settings",
                "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)])})
    done = subprocess.run([sys.executable, str(SCRIPT), *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("empty_database", ["sqlite", "postgresql"], indirect=True)
def test_upgrade_keeps_every_row_of_the_moved_tables(empty_database, tmp_path):
    result = run_check(empty_database, tmp_path)
    before, after = result["before"], result["after"]

    assert {name: len(rows) for name, rows in before["rows"].items()} == {
        "Conversation": 1, "Message": 2, "ApiKey": 1, "ApiUsage": 1}
    # Every field of every row, through chat's and api's models (fields added later, such as a
    # conversation's is_pinned, take their defaults and are not compared).
    assert {name: [{k: row[k] for k in old} for row, old in zip(rows, before["rows"][name], strict=True)]
            for name, rows in after["rows"].items()} == before["rows"]
    assert after["through_relations"] == ["acme", "Be brief.", "wiki bot"]
    new_id, old_max = after["new_id_after"]
    assert new_id > old_max

    # The content types moved with their models (same ids), so permissions and admin history stay attached.
    assert after["content_types"] == {f"{app}.{name.lower()}": before["content_type_ids"][name]
                                      for name, app in MOVED.items()}
    assert after["permission_apps"] == ["api"]  # the old permission, not a second one
    assert after["audit_object_types"] == ["api.apikey"]


@pytest.mark.parametrize("empty_database", ["sqlite"], indirect=True)
def test_the_models_and_migrations_agree(empty_database, tmp_path):
    assert run_check(empty_database, tmp_path, "--makemigrations")["makemigrations_exit"] == 0


def test_admin_links_of_the_moved_models_still_lead_to_them(client, superuser):
    client.force_login(superuser)
    for old, new in [("/admin/tenants/apikey/", "/admin/api/apikey/"),
                     ("/admin/tenants/apiusage/?endpoint=models", "/admin/api/apiusage/?endpoint=models"),
                     ("/admin/tenants/conversation/7/change/", "/admin/chat/conversation/7/change/")]:
        response = client.get(old)
        assert (response.status_code, response["Location"]) == (301, new)
    assert client.get("/admin/api/apikey/").status_code == 200
    assert client.get("/admin/tenants/tenant/").status_code == 200  # what stayed is not redirected
