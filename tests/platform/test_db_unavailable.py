"""A database that cannot serve a page in time: 503 + Retry-After (HTML for browsers, JSON for programs)
from pagoda.unavailable, never the 500 page; other database errors stay 500. Page requests queue in
pagoda.db_queue, N at a time. In-process, through the ASGI handler (django.test.AsyncClient), where the
exception reaches handler500 in another thread. The live burst and the live lock: tests/reliability/test_burst.py.
"""
import asyncio
from unittest import mock

import pytest
from django.db import IntegrityError, OperationalError
from django.test import AsyncClient

from pagoda import db_queue


@pytest.fixture
def logged_in(member, client):
    client.force_login(member)
    browser = AsyncClient(raise_request_exception=False)
    browser.cookies = client.cookies
    return browser


def _failing(exc):
    return mock.patch("chat.views.tenant_selectors.tenants_for_user", side_effect=exc)


@pytest.mark.django_db(transaction=True)
async def test_a_locked_database_is_a_503_page_with_retry_after(logged_in):
    with _failing(OperationalError("database is locked")):
        page = await logged_in.get("/chat/", ACCEPT="text/html")
        data = await logged_in.get("/chat/", ACCEPT="application/json")
    assert page.status_code == 503 and int(page["Retry-After"]) >= 1
    assert "try again" in page.content.decode() and "Traceback" not in page.content.decode()
    assert data.status_code == 503 and data.json()["error"]["code"] == "database_unavailable"
    assert int(data["Retry-After"]) >= 1


@pytest.mark.django_db(transaction=True)
async def test_a_bug_in_a_query_is_still_a_500(logged_in):
    with _failing(IntegrityError("duplicate key")):
        page = await logged_in.get("/chat/")
    assert page.status_code == 500 and "Retry-After" not in page


@pytest.mark.django_db(transaction=True)
async def test_page_requests_queue_n_at_a_time(logged_in, settings):
    """3 slots, 8 requests at once: never more than 3 inside, all answered 200; a request that waits past
    the queue timeout gets the 503."""
    settings.PAGODA_DB_MAX_CONCURRENT_REQUESTS = 3
    inside, most = 0, 0

    async def slow_view(request):
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        await asyncio.sleep(0.05)
        inside -= 1
        from django.http import HttpResponse

        return HttpResponse("ok")

    queue = db_queue.DatabaseQueueMiddleware(slow_view)
    from django.test import RequestFactory

    requests = [RequestFactory().get("/chat/") for _ in range(8)]
    answers = await asyncio.gather(*(queue(r) for r in requests))
    assert [a.status_code for a in answers] == [200] * 8 and most == 3

    settings.PAGODA_DB_QUEUE_TIMEOUT_SECONDS = 0.01
    answers = await asyncio.gather(*(queue(RequestFactory().get("/chat/", HTTP_ACCEPT="application/json"))
                                     for _ in range(4)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200, 200, 200, 503], statuses
    assert "Retry-After" in [a for a in answers if a.status_code == 503][0]

    for _ in range(3):  # every slot taken: /v1/ and the probes still pass, a page times out
        await queue._slots.acquire()
    for path in ("/v1/models", "/health", "/metrics"):
        assert (await queue(RequestFactory().get(path))).status_code == 200, path
    assert (await queue(RequestFactory().get("/chat/"))).status_code == 503
