"""The OpenID Connect sign-in in a real headless Chromium: Pagoda's daphne server (its own SQLite
database, engine off) and the test provider, both on loopback. Click "Sign in with Test IdP", log in
at the provider, land in the chat as a new user with the mapped tenant; the provider drops the group,
the next sign-in withdraws the membership; the used callback URL, opened again, shows the refusal page.

Needs Debian's chromium and playwright (as tests/chat/test_chat_browser.py): skipped with the reason
when either is missing.
"""
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import PAGODA_BROWSER_PORT
from sso_servers import stop

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("PAGODA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--no-first-run"]
SEED = """
from sso.models import GroupMapping
from tenants import services
acme = services.create_tenant(name="Acme", slug="acme")
GroupMapping.objects.create(source="oidc", group="pagoda-sales", tenant=acme, role="member")
"""
MEMBERSHIPS = """
import json
from tenants.models import Membership
print(json.dumps(sorted(Membership.objects.filter(user__username="carol").values_list("tenant__slug", flat=True))))
"""


@pytest.fixture(scope="module")
def pagoda(provider, tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (bash deploy/install_browser.sh)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright==1.65.2)")
    folder = tmp_path_factory.mktemp("sso-pagoda")
    env = {**os.environ, **provider.environment(),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)]),
           "DJANGO_SETTINGS_MODULE": "pagoda.settings", "DATABASE_URL": f"sqlite:///{folder / 'pagoda.sqlite3'}",
           "PAGODA_VAR_DIR": str(folder), "PAGODA_ENGINE": "off", "PAGODA_PIN_SYNC_SECONDS": "0",
           "ALLOWED_HOSTS": "127.0.0.1", "DEBUG": "false", "LOG_LEVEL": "WARNING", "REDIS_URL": ""}
    manage = [sys.executable, str(ROOT / "manage.py")]
    for command in (["migrate", "--noinput"], ["shell", "-c", SEED]):
        subprocess.run([*manage, *command], env=env, check=True, capture_output=True, timeout=300)
    log = folder / "daphne.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(PAGODA_BROWSER_PORT),
                                   "pagoda.asgi:application"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{PAGODA_BROWSER_PORT}"
    deadline = time.monotonic() + 120
    while True:
        if server.poll() is not None:
            pytest.fail(f"daphne exited:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url + "/accounts/login/", timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"daphne did not answer:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
    server.memberships = lambda: json.loads(subprocess.run(
        [*manage, "shell", "-c", MEMBERSHIPS], env=env, check=True, capture_output=True, text=True, timeout=120).stdout.strip().splitlines()[-1])
    try:
        yield url, server
    finally:
        stop(server)


def sign_in(page, url: str, provider) -> None:
    page.goto(url + "/accounts/login/")
    page.click("text=Sign in with Test IdP")
    page.wait_for_url(lambda u: u.startswith(provider.url + "/accounts/login/"))  # the provider's own page
    page.fill("#id_username", "carol")
    page.fill("#id_password", "carol-pw")
    page.click("#provider-login")
    page.wait_for_url(lambda u: u.startswith(url + "/chat/"))


def test_sign_in_through_the_provider_in_chromium(pagoda, provider, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, server = pagoda
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context(locale="en-US")
            page = context.new_page()
            callbacks = []
            page.on("request", lambda r: callbacks.append(r.url) if "/sso/oidc/callback/" in r.url else None)
            sign_in(page, url, provider)
            expect(page.locator("body")).to_contain_text("carol")  # the chat, signed in as the new user
            page.screenshot(path=tmp_path / "signed-in.png")
            assert server.memberships() == ["acme"]

            # The used callback URL, opened again: a clear refusal, no 500.
            response = page.goto(callbacks[-1])
            assert response.status == 400
            expect(page.locator("[data-sso-reason=state]")).to_contain_text("already used")

            # The directory drops the group: the next sign-in withdraws the membership.
            provider.shell("from django.contrib.auth.models import User\n"
                           "User.objects.get(username='carol').groups.clear()")
            context.clear_cookies()
            sign_in(page, url, provider)
            assert server.memberships() == []
        finally:
            browser.close()
            provider.shell("from django.contrib.auth.models import Group, User\nu = User.objects.get(username='carol')\n"
                           "u.groups.set([Group.objects.get(name=n) for n in ('pagoda-sales', 'pagoda-admins')])")
