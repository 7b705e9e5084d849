"""Offboarding on live servers: an employee's open chat socket and an administrator's browser (the admin
site), or the employee's own other tab. A logout, a deactivation (mid-reply: the reply is stopped and
saved), a password change, removal from the tenant and tenant deactivation close the socket within
5 s, with an error frame first, and a message sent on it after gets no reply. A session deleted in
the database with no announcement is refused at the next turn. Then two server processes sharing
Redis: a change made on one (or by a script) closes a socket open on the other.

The socket is a raw WebSocket (ws_client.RawSocket), so that a frame can still be sent after the
server's error frame and everything the server sends after it is seen, byte for byte.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time

import httpx
import pytest

import reliability_server as rs
from ws_client import RawSocket, socket_headers

CLOSE_WITHIN_S = 5.0
ROOT_PASSWORD = "root-pw-reliability"  # reliability_seed.ROOT_PASSWORD
USER_PASSWORD = "pw"  # every seeded employee's
SEED = {"num_users": 5, "num_conversations": 2, "max_tokens": 6, "long_tokens": 300, "superuser": True}


@pytest.fixture(scope="module")
def live(tmp_path_factory, tiny_llama_path):
    with rs.running_server(tmp_path_factory.mktemp("offboarding"), str(tiny_llama_path),
                           engine_config={"num_kv_blocks": 512, "max_num_seqs": 16}, seed=SEED) as server:
        yield server


# --- browsers and sockets ---
def _user(server, username: str) -> dict:
    return next(u for u in server.users if u["username"] == username)


def browser(base_url: str, username: str | None = None, password: str | None = None, session: str | None = None):
    """An httpx client as a browser: logged in through the login form, or carrying a session cookie."""
    client = httpx.Client(base_url=base_url, timeout=30)
    if session:
        client.cookies.set("sessionid", session)
        return client
    client.get("/accounts/login/").raise_for_status()
    response = post_form(client, "/accounts/login/", {"username": username, "password": password})
    assert response.status_code == 302, f"login of {username}: {response.status_code}"
    return client


def post_form(client: httpx.Client, path: str, data: dict) -> httpx.Response:
    if "csrftoken" not in client.cookies:
        client.get("/chat/")  # a page with forms sets the CSRF cookie
    return client.post(path, data={**data, "csrfmiddlewaretoken": client.cookies["csrftoken"]})


def open_socket(base_url: str, conversation_id: int, session: str) -> RawSocket:
    ws = RawSocket(base_url.replace("http://", "ws://") + f"/ws/chat/{conversation_id}/",
                   socket_headers(session, base_url), timeout=CLOSE_WITHIN_S)
    assert " 101 " in ws.status_line, ws.status_line
    return ws


def send_json(ws: RawSocket, frame: dict | str) -> None:
    ws.send_frame((frame if isinstance(frame, str) else json.dumps(frame)).encode())


def text_frame(ws: RawSocket) -> dict:
    opcode, payload = ws.recv_frame()
    assert opcode == 0x1, (opcode, payload)
    return json.loads(payload)


def expect_closed(ws: RawSocket, started: float, close_code: int, error_code: str) -> None:
    """Within CLOSE_WITHIN_S of `started`: the error frame (deltas of a reply being stopped may come
    first), then the close frame; a message the client sends then gets no reply (the server may have
    dropped the connection already: then the send itself fails)."""
    while True:
        frame = text_frame(ws)
        if frame["type"] != "delta":
            break
    assert frame["type"] == "error" and frame["code"] == error_code and frame["message"], frame
    opcode, payload = ws.recv_frame()
    assert opcode == 0x8, (opcode, payload)  # a close, nothing else
    assert int.from_bytes(payload[:2], "big") == close_code
    assert time.monotonic() - started < CLOSE_WITHIN_S
    try:
        send_json(ws, {"type": "user_message", "content": "Am I still here?"})
    except OSError:
        return
    with pytest.raises(OSError):  # ConnectionError included: the connection ends, no frame comes
        ws.recv_frame()


def expect_served(ws: RawSocket) -> None:
    send_json(ws, "{broken")
    assert text_frame(ws)["code"] == "invalid_json"


def admin_action(admin: httpx.Client, path: str, data: dict) -> None:
    response = post_form(admin, path, data)
    assert response.status_code == 302, (path, response.status_code, response.text[-2000:])


def num_messages(server, conversation_id: int) -> int:
    return server.db.row("SELECT count(*) AS n FROM tenants_message WHERE conversation_id = %s",
                         (conversation_id,))["n"]


# --- one server ---
def test_logout_in_another_tab_closes_the_socket_and_not_another_devices(live):
    user = _user(live, "acme-user-0")
    tab = browser(live.url, user["username"], USER_PASSWORD)
    ws = open_socket(live.url, user["conversations"][0], tab.cookies["sessionid"])
    phone = open_socket(live.url, user["conversations"][1], user["session"])  # the seeded session: another device
    try:
        started = time.monotonic()
        assert post_form(tab, "/accounts/logout/", {}).status_code == 302  # the other tab logs out
        expect_closed(ws, started, 4401, "signed_out")
        expect_served(phone)
    finally:
        ws.close()
        phone.close()


def test_deactivation_mid_reply_stops_the_reply_and_closes_the_socket(live):
    user = _user(live, "acme-user-1")
    conversation_id = user["conversations"][0]
    admin = browser(live.url, "root", ROOT_PASSWORD)
    ws = open_socket(live.url, conversation_id, user["session"])
    try:
        send_json(ws, {"type": "user_message", "content": "Tell me a long story.", "profile": "long"})
        ws.sock.settimeout(120)  # a first token on two shared cores
        assert text_frame(ws)["type"] == "start"
        assert text_frame(ws)["type"] == "delta"
        ws.sock.settimeout(CLOSE_WITHIN_S)
        started = time.monotonic()
        admin_action(admin, "/admin/auth/user/", {"action": "deactivate_users", "_selected_action": user["id"],
                                                  "index": 0})
        expect_closed(ws, started, 4401, "signed_out")
    finally:
        ws.close()
    reply = live.db.row("SELECT status, num_output_tokens FROM tenants_message WHERE conversation_id = %s "
                        "AND role = 'assistant' ORDER BY id DESC", (conversation_id,))
    assert reply["status"] == "stopped" and 0 < reply["num_output_tokens"] < SEED["long_tokens"], reply
    assert live.db.row("SELECT count(*) AS n FROM django_session WHERE session_key = %s", (user["session"],))["n"] == 0
    stats = live.wait_idle()
    assert rs.leaked_blocks(stats) == 0


def test_an_admin_password_change_closes_the_socket(live):
    user = _user(live, "acme-user-2")
    admin = browser(live.url, "root", ROOT_PASSWORD)
    ws = open_socket(live.url, user["conversations"][0], user["session"])
    try:
        started = time.monotonic()
        admin_action(admin, f"/admin/auth/user/{user['id']}/password/",
                     {"password1": "Another pass phrase 9", "password2": "Another pass phrase 9",
                      "usable_password": "true"})
        expect_closed(ws, started, 4401, "signed_out")
    finally:
        ws.close()


def test_removal_from_the_tenant_closes_the_socket(live):
    user = _user(live, "acme-user-3")
    admin = browser(live.url, "root", ROOT_PASSWORD)
    membership = live.db.row("SELECT id FROM tenants_membership WHERE user_id = %s", (user["id"],))
    ws = open_socket(live.url, user["conversations"][0], user["session"])
    try:
        started = time.monotonic()
        admin_action(admin, f"/admin/tenants/membership/{membership['id']}/delete/", {"post": "yes"})
        expect_closed(ws, started, 4403, "access_revoked")
    finally:
        ws.close()


def test_a_session_deleted_in_the_database_is_refused_at_the_next_turn(live):
    user = _user(live, "acme-user-4")
    conversation_id = user["conversations"][0]
    ws = open_socket(live.url, conversation_id, user["session"])
    try:
        expect_served(ws)  # set up: a session deleted before then is refused at connect (its access re-read)
        with sqlite3.connect(live.db.url.removeprefix("sqlite:///")) as conn:  # no signal, no announcement
            conn.execute("DELETE FROM django_session WHERE session_key = ?", (user["session"],))
        expect_served(ws)  # nothing told the socket: it is still open ...
        started = time.monotonic()
        send_json(ws, {"type": "user_message", "content": "hello"})  # ... but its next turn checks
        frame = text_frame(ws)
        assert frame["type"] == "error" and frame["code"] == "signed_out", frame
        opcode, payload = ws.recv_frame()
        assert opcode == 0x8 and int.from_bytes(payload[:2], "big") == 4401
        assert time.monotonic() - started < CLOSE_WITHIN_S
    finally:
        ws.close()
    assert num_messages(live, conversation_id) == 0


def test_tenant_deactivation_closes_its_members_sockets(live):
    """Last: globex stays inactive."""
    members = [u for u in live.users if u["tenant"] == "globex"][:2]
    admin = browser(live.url, "root", ROOT_PASSWORD)
    sockets = [open_socket(live.url, u["conversations"][0], u["session"]) for u in members]
    acme = open_socket(live.url, _user(live, "acme-user-0")["conversations"][0], _user(live, "acme-user-0")["session"])
    try:
        started = time.monotonic()
        admin_action(admin, f"/admin/tenants/tenant/{live.tenants['globex']}/change/", {"name": "Globex", "slug": "globex"})
        for ws in sockets:
            expect_closed(ws, started, 4403, "access_revoked")
        expect_served(acme)
    finally:
        for ws in [*sockets, acme]:
            ws.close()


# --- two server processes sharing Redis ---
def _redis_missing() -> str | None:
    try:
        import redis

        redis.Redis.from_url(os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0",
                             socket_connect_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001
        return f"Redis is not reachable ({exc.__class__.__name__})"
    return None


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two daphne processes on one SQLite database and Redis, the engine off (the sockets close before
    any turn, and a refused turn never reaches the engine)."""
    missing = _redis_missing()
    if missing:
        pytest.skip(missing)
    import secrets

    folder = tmp_path_factory.mktemp("offboarding-pair")
    env = rs.live.server_env(f"sqlite:///{folder / 'pair.sqlite3'}", "unused", folder, secrets.token_urlsafe(40))
    env.update({"PAGODA_ENGINE": "off", "REDIS_URL": env.get("REDIS_URL") or "redis://127.0.0.1:6379/0",
                "RELIABILITY_SEED": json.dumps({**SEED, "num_users": 2}), "LOG_LEVEL": "WARNING"})
    done = subprocess.run([rs.PYTHON, str(rs.HERE / "reliability_seed.py")], env=env, cwd=rs.ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    seeded = json.loads(done.stdout.strip().splitlines()[-1])
    servers = [rs._start(env, folder / f"server-{i}.log", False, []) for i in range(2)]
    try:
        for process, url in servers:
            _wait_listening(process, url)
        yield {"urls": [url for _, url in servers], "users": seeded["users"], "env": env}
    finally:
        for process, _ in servers:
            rs.live.stop(process)


def _wait_listening(process: subprocess.Popen, url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"a server process exited ({process.returncode})"
        try:
            if httpx.get(f"{url}/accounts/login/", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} did not listen in {timeout} s")


def test_logout_on_one_process_closes_the_socket_on_the_other(pair):
    here, there = pair["urls"]
    user = next(u for u in pair["users"] if u["tenant"] == "acme")
    tab = browser(here, user["username"], USER_PASSWORD)
    ws = open_socket(there, user["conversations"][0], tab.cookies["sessionid"])
    try:
        started = time.monotonic()
        assert post_form(tab, "/accounts/logout/", {}).status_code == 302
        expect_closed(ws, started, 4401, "signed_out")
    finally:
        ws.close()


def test_deactivation_by_a_script_closes_the_socket_on_a_server(pair):
    """A third process (as `manage.py shell` would be) deactivates: Redis carries it to the server."""
    here, _ = pair["urls"]
    user = next(u for u in pair["users"] if u["tenant"] == "globex")
    ws = open_socket(here, user["conversations"][0], user["session"])
    script = ("import django; django.setup()\n"
              "from django.contrib.auth import get_user_model\n"
              f"u = get_user_model().objects.get(username={user['username']!r})\n"
              "u.is_active = False\nu.save()\n")
    try:
        done = subprocess.run([rs.PYTHON, "-c", script], env=pair["env"], cwd=rs.ROOT, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-3000:]
        expect_closed(ws, time.monotonic(), 4401, "signed_out")  # from the script's end (it saves last)
    finally:
        ws.close()
