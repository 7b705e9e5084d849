"""Helpers for the headless Chromium tests: a seeded daphne server of the project on a free port, and
Playwright pages at a desktop or a phone size, in English or Korean.

Needs Debian's chromium (`apt-get install -y chromium`) and `pip install playwright==1.65.2` (its
bundled driver only; never `playwright install`): the fixtures skip with the reason when either is missing.
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = os.environ.get("PAGODA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--no-first-run"]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def require_browser() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright==1.65.2)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str, path: str) -> bool:
    try:
        with urllib.request.urlopen(url + path, timeout=5) as response:
            return response.status == 200
    except (OSError, urllib.error.HTTPError):
        return False


@contextlib.contextmanager
def serve(folder: Path, seed: str, *, engine: bool, ready_path: str = "/health", timeout: float = 300):
    """Migrate a fresh SQLite database in `folder`, run `seed` in manage.py shell, start daphne; yields its
    URL once `ready_path` answers 200 (/health: the engine serves), and stops it (terminate, then kill)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": "pagoda.settings",
        "DATABASE_URL": f"sqlite:///{folder / 'e2e.sqlite3'}",  # its own database, whatever the tests use
        "PAGODA_VAR_DIR": str(folder),
        "PAGODA_ENGINE": "on" if engine else "off",
        "PAGODA_DEVICE": os.environ.get("PAGODA_DEVICE", "cpu"),
        "PAGODA_PIN_SYNC_SECONDS": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("REDIS_URL", None)  # one process: the in-memory channel layer
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput"], env={**env, "PAGODA_ENGINE": "off"}, check=True,
                   capture_output=True, timeout=300)
    subprocess.run([*manage, "shell", "-c", seed], env={**env, "PAGODA_ENGINE": "off"}, check=True,
                   capture_output=True, timeout=300)
    port = free_port()
    log = folder / "daphne.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                   "pagoda.asgi:application"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while not _ready(url, ready_path):
            if server.poll() is not None:
                pytest.fail(f"daphne exited with {server.returncode}:\n{log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"{url}{ready_path} did not answer 200 in {timeout:.0f} s:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextlib.contextmanager
def browser_page(viewport: dict, locale: str = "en-US", color_scheme: str = "light", timeout_ms: int = 120_000):
    """A fresh Chromium page (its own context: cookies, storage) with page.errors collecting script errors.
    The default timeout suits replies from a CPU; pages that wait for no reply pass a shorter one."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=timeout_ms)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context(viewport=viewport, locale=locale, color_scheme=color_scheme,
                                          accept_downloads=True)
            page = context.new_page()
            page.set_default_timeout(timeout_ms)
            page.errors = []
            page.on("pageerror", lambda error: page.errors.append(str(error)))
            yield page
        finally:
            browser.close()


def log_in(page, url: str, username: str, password: str) -> None:
    page.goto(url + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url("**/chat/**")


def keep_screenshot(path: Path) -> None:
    """Copy a screenshot to docs/screenshots/ when PAGODA_UPDATE_SCREENSHOTS=1 (off by default, so a test
    run leaves the checkout as it found it)."""
    if os.environ.get("PAGODA_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        (SCREENSHOTS / path.name).write_bytes(path.read_bytes())
