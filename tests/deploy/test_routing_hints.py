"""What the platform gives the load balancer to route by, and the shipped deployment files themselves."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from pagoda.middleware import REPLICA_HEADER, ROUTING_COOKIE
from replica_cluster import NGINX_CONF, nginx_binary, render_nginx
from api import services as api_services
from tenants import services

ROOT = Path(__file__).resolve().parents[2]
KEY_TENANT = re.compile(r"^pgd-[A-Za-z0-9_-]+\.([A-Za-z0-9_-]{1,50})$")  # as in deploy/nginx/pagoda.conf


@pytest.fixture
def member(db, django_user_model):
    user = django_user_model.objects.create_user(username="erin", password="pw")
    services.add_member(services.create_tenant(name="Initech", slug="initech"), user)
    services.add_member(services.create_tenant(name="Acme", slug="acme"), user)
    return user


def test_api_keys_end_in_their_tenant(db):
    tenant = services.create_tenant(name="Acme Korea", slug="acme-kr_2")
    _, plaintext = api_services.create_api_key(tenant, "wiki bot")
    assert KEY_TENANT.match(plaintext).group(1) == "acme-kr_2"
    assert len(plaintext.split(".")[0]) == len("pgd-") + 43  # 256 random bits before the tenant


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_logged_in_user_gets_the_routing_cookie_once(client, member, settings, run):
    settings.PAGODA_REPLICA = "gpu-3"
    if run == "async":  # the ASGI path (the servers run it)
        client = AsyncClient()
        async_to_sync(client.aforce_login)(member)

        def get(path):
            return async_to_sync(client.get)(path)
    else:
        client.force_login(member)
        get = client.get
    response = get("/chat/")
    assert response[REPLICA_HEADER] == "gpu-3"
    cookie = response.cookies[ROUTING_COOKIE]
    assert cookie.value == "acme"  # the first tenant by name, what "New chat" opens
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert ROUTING_COOKIE not in get("/chat/").cookies  # the browser has it now: no query, no new cookie


def test_no_routing_cookie_for_anonymous_or_api_or_probes(client, member, settings):
    settings.PAGODA_REPLICA = ""
    response = client.get("/accounts/login/")
    assert ROUTING_COOKIE not in response.cookies and REPLICA_HEADER not in response
    client.force_login(member)
    for path in ("/health", "/v1/models"):
        assert ROUTING_COOKIE not in client.get(path).cookies


def test_the_nginx_config_routes_streams_and_sockets_as_documented():
    conf = NGINX_CONF.read_text()
    assert re.search(r"upstream pagoda_replicas \{\s*hash \$pagoda_route_key consistent;", conf)
    v1 = re.search(r"location /v1/ \{(.*?)\}", conf, re.S).group(1)
    assert "proxy_buffering off;" in v1 and "gzip off;" in v1
    assert "proxy_set_header Upgrade $http_upgrade;" in conf and "$pagoda_connection" in conf
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in conf  # overwritten: daphne trusts the first
    assert "$pagoda_route_key" not in conf.split("log_format")[1].split(";")[0]  # it may hold a key
    assert KEY_TENANT.pattern.split("\\.")[1].rstrip("$") in conf  # the key pattern the test above checks


@pytest.mark.skipif(nginx_binary() is None, reason="needs nginx (deploy/install_system_packages.sh)")
def test_the_nginx_config_is_valid_for_nginx(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "pagoda.conf").write_text(render_nginx(NGINX_CONF.read_text(), listen_port=18080,
                                                       replica_ports=[18100, 18101, 18102], log_dir=tmp_path / "logs"))
    assert (tmp_path / "pagoda.conf").read_text().count("server 127.0.0.1:181") == 3
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid; error_log {tmp_path}/logs/error.log; events {{}}\n"
        f"http {{ include {tmp_path}/pagoda.conf; }}\n")
    done = subprocess.run([nginx_binary(), "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_env_example_documents_every_setting_read_from_the_environment():
    read = set(re.findall(r'os\.environ(?:\.get)?[\[(]"([A-Z_]+)"', (ROOT / "platform/pagoda/settings.py").read_text()))
    read |= set(re.findall(r"\$\{?([A-Z][A-Z_]+)", (ROOT / "deploy/replica.sh").read_text()))
    documented = set(re.findall(r"^#? ?([A-Z][A-Z_]+)=", (ROOT / "deploy/env.example").read_text(), re.M))
    internal = {"PWD", "PYTHONPATH", "INDEX", "PY", "DJANGO_SETTINGS_MODULE", "TOKENIZERS_PARALLELISM"}
    assert read - internal - documented == set()
