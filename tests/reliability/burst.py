"""A login burst against a live server: N employees log in through the real login form at the same
moment, each opens a new conversation ("New chat") and sends one message over the WebSocket, as a
browser would: GET the form (CSRF cookie and token), POST it, follow the redirects to the chat page,
POST /chat/new/, open the conversation's page, then its socket (session cookie + same Origin).

    results = asyncio.run(run_burst(server, users, password="pw", timeout=300))
    failures = verify(server, results, max_tokens)   # {"login_failed": 0, "http_5xx": 0, ...}

Every HTTP answer is recorded: any 5xx is a failure, whatever the step. Used by test_burst.py and
load.py (--logins).
"""
from __future__ import annotations

import asyncio
import re
import time

import httpx

from ws_client import open_chat, run_turn

_CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class StepFailed(Exception):
    """A step of the flow got an answer a browser would not go on from."""


async def _request(http: httpx.AsyncClient, result: dict, method: str, path: str, **kwargs) -> httpx.Response:
    response = await http.request(method, path, **kwargs)
    result["statuses"].append((method, path, response.status_code))
    return response


async def _login(http: httpx.AsyncClient, result: dict, username: str, password: str) -> None:
    form = await _request(http, result, "GET", "/accounts/login/")
    token = _CSRF_INPUT.search(form.text) if form.status_code == 200 else None
    if token is None:
        raise StepFailed(f"login form: {form.status_code}")
    started = time.monotonic()
    answer = await _request(http, result, "POST", "/accounts/login/",
                            data={"username": username, "password": password, "csrfmiddlewaretoken": token[1]})
    result["login_s"] = time.monotonic() - started
    # Django answers a good login with a redirect to LOGIN_REDIRECT_URL; a refused one re-renders the form.
    if answer.status_code != 302 or "sessionid" not in http.cookies:
        raise StepFailed(f"login: {answer.status_code}")
    result["logged_in"] = True
    page = await _request(http, result, "GET", answer.headers["location"])
    while page.status_code == 302:  # / -> /chat/
        page = await _request(http, result, "GET", page.headers["location"])
    if page.status_code != 200:
        raise StepFailed(f"chat page after login: {page.status_code}")


async def _new_chat(http: httpx.AsyncClient, result: dict) -> int:
    answer = await _request(http, result, "POST", "/chat/new/",
                            data={"csrfmiddlewaretoken": http.cookies["csrftoken"]})
    found = re.fullmatch(r"/chat/(\d+)/", answer.headers.get("location", "")) if answer.status_code == 302 else None
    if found is None:
        raise StepFailed(f"new chat: {answer.status_code}")
    page = await _request(http, result, "GET", found[0])
    if page.status_code != 200:
        raise StepFailed(f"conversation page: {page.status_code}")
    return int(found[1])


async def one_employee(server, username: str, password: str, question: str, timeout: float) -> dict:
    """Log in, open a new chat, send `question`; what happened, step by step."""
    result: dict = {"kind": "login", "username": username, "statuses": [], "logged_in": False, "ok": False}
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=timeout) as http:
            await _login(http, result, username, password)
            result["conversation_id"] = await _new_chat(http, result)
            async with open_chat(server, result["conversation_id"], http.cookies["sessionid"]) as ws:
                turn = await run_turn(ws, question, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - counted as a failed employee
        result["error"] = repr(exc)
        return result
    end = turn.end or {}
    start = turn.frames[0] if turn.frames else {}
    result.update(ok=end.get("type") == "done", end=end, text=turn.text, message_id=start.get("message_id"),
                  ttft=turn.ttft, tokens=(end.get("usage") or {}).get("completion_tokens"),
                  seconds=time.monotonic() - started)
    return result


async def run_burst(server, users: list[dict], password: str, timeout: float, label: str = "") -> list[dict]:
    """Every user of `users` at once (their "username")."""
    return await asyncio.gather(*(
        one_employee(server, user["username"], password, f"{label}Hello from {user['username']}: what is 2 plus {i}?",
                     timeout) for i, user in enumerate(users)))


def verify(server, results: list[dict], max_tokens: int) -> dict:
    """Failure counts, checked against what the server saved."""
    failures = {"login_failed": 0, "http_5xx": 0, "turn_not_done": 0, "reply_not_saved": 0,
                "user_message_not_saved": 0, "last_login_not_saved": 0}
    failures["http_5xx"] = sum(1 for r in results for _, _, status in r["statuses"] if status >= 500)
    failures["login_failed"] = sum(1 for r in results if not r["logged_in"])
    failures["turn_not_done"] = sum(1 for r in results if not r["ok"])
    done = [r for r in results if r["ok"]]
    if done:
        ids = ",".join(str(r["message_id"]) for r in done)
        replies = {row["id"]: row for row in server.db.rows(
            f"SELECT id, conversation_id, content, status, num_output_tokens FROM tenants_message WHERE id IN ({ids})")}
        for r in done:
            row = replies.get(r["message_id"])
            if (row is None or row["status"] != "complete" or row["content"] != r["text"]
                    or row["num_output_tokens"] != max_tokens or row["conversation_id"] != r["conversation_id"]):
                failures["reply_not_saved"] += 1
        conversations = ",".join(str(r["conversation_id"]) for r in done)
        asked = {row["conversation_id"]: row["n"] for row in server.db.rows(
            "SELECT conversation_id, COUNT(*) AS n FROM tenants_message WHERE role = 'user' "
            f"AND conversation_id IN ({conversations}) GROUP BY conversation_id")}
        failures["user_message_not_saved"] = sum(1 for r in done if asked.get(r["conversation_id"]) != 1)
    names = ",".join(f"'{r['username']}'" for r in results if r["logged_in"])
    if names:
        stamped = server.db.row(f"SELECT COUNT(*) AS n FROM auth_user WHERE username IN ({names}) "
                                "AND last_login IS NOT NULL")["n"]
        failures["last_login_not_saved"] = sum(1 for r in results if r["logged_in"]) - stamped
    return failures


def figures(results: list[dict], wall_s: float) -> dict:
    """Login time (POST -> redirect) and whole-employee time (form -> done frame), p50 / p99 / max, in s."""
    from load import percentile

    def s(values):
        return {q: round(percentile(values, n), 1) if values else None for q, n in (("p50", 50), ("p99", 99))} | {
            "max": round(max(values), 1) if values else None}

    return {"wall_s": round(wall_s, 1), "num_ok": sum(1 for r in results if r["ok"]), "num": len(results),
            "login_s": s([r["login_s"] for r in results if "login_s" in r]),
            "employee_s": s([r["seconds"] for r in results if "seconds" in r]),
            "ttft_s": s([r["ttft"] for r in results if r.get("ttft") is not None]),
            "errors": [r.get("error") or r.get("end") for r in results if not r["ok"]][:5]}
