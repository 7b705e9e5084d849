"""The people page in headless Chromium (no engine): a tenant admin invites someone, the link (shown
once) opened in another browser makes their account and lands them in the chat, and deactivating them
from the page ends that browser's session. Skips without Chromium or Playwright (browser_testing)."""
import contextlib
import re

import pytest

from browser_testing import CHROMIUM, CHROMIUM_FLAGS, DESKTOP, log_in, require_browser, serve

SEED = """
from django.contrib.auth import get_user_model
from tenants import services
from tenants.models import Membership
tenant = services.create_tenant(name="Acme", slug="acme")
admin = get_user_model().objects.create_user("ann", password="ann-pw-123")
services.add_member(tenant, admin, role=Membership.Role.ADMIN)
"""


@pytest.fixture(scope="module")
def people_server(tmp_path_factory):
    require_browser()
    with serve(tmp_path_factory.mktemp("people-ui"), SEED, engine=False, ready_path="/accounts/login/") as url:
        yield url


@contextlib.contextmanager
def two_pages():
    """Two pages of one Chromium, each its own context (cookies): two people at two computers."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            pages = []
            for _ in range(2):
                page = browser.new_context(viewport=DESKTOP).new_page()
                page.set_default_timeout(30_000)
                page.errors = []
                page.on("pageerror", lambda error, page=page: page.errors.append(str(error)))
                pages.append(page)
            yield pages
        finally:
            browser.close()


def test_invite_join_and_deactivate_in_the_browser(people_server):
    url = people_server
    with two_pages() as (admin, dana):
        log_in(admin, url, "ann", "ann-pw-123")
        admin.goto(url + "/console/acme/")
        admin.click("text=manage people")
        admin.wait_for_url("**/console/acme/people/")
        admin.fill("#id_email", "dana@acme.example")
        admin.select_option("#id_role", "member")
        admin.click("text=Create invitation")
        message = admin.locator("ul.messages li.warning").inner_text()
        link = re.search(r"(http://\S+/accounts/invitation/\S+/)", message).group(1)
        assert "dana@acme.example" in admin.locator("table").last.inner_text()  # listed as open

        dana.goto(link)
        assert "Join Acme" in dana.content()
        dana.fill("#id_username", "dana")
        dana.fill("#id_password1", "a long passphrase 77")
        dana.fill("#id_password2", "a long passphrase 77")
        dana.click("text=Create account and join")
        dana.wait_for_url("**/chat/**")  # logged in, a member: the chat is hers
        assert "/accounts/login/" not in dana.url

        admin.goto(url + "/console/acme/people/")
        assert "Member" in admin.locator('tr[data-username="dana"]').inner_text()
        row = admin.locator('tr[data-username="dana"]')
        row.locator("text=Deactivate account").click()
        assert "dana: deactivated" in admin.locator("ul.messages").inner_text()
        assert "deactivated" in admin.locator('tr[data-username="dana"]').inner_text()

        dana.goto(url + "/chat/")
        assert "/accounts/login/" in dana.url  # her session ended
        assert not admin.errors
