"""/metrics is for allowed addresses (PAGODA_METRICS_ALLOWED_IPS) or holders of PAGODA_METRICS_TOKEN."""
import pytest

from observability.access import address_allowed


def test_localhost_may_scrape_by_default(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert b"pagoda_engine_up" in response.content


def test_other_addresses_are_forbidden(client):
    response = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert response.status_code == 403
    assert b"pagoda_" not in response.content


def test_the_bearer_token_opens_it_from_anywhere(client, settings):
    settings.PAGODA_METRICS_TOKEN = "s3cret-token"
    ok = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert ok.status_code == 200
    for header in ("Bearer wrong", "Basic s3cret-token", "s3cret-token", "Bearer "):
        assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION=header).status_code == 403


def test_token_only_when_no_address_is_allowed(client, settings):
    settings.PAGODA_METRICS_ALLOWED_IPS = []
    settings.PAGODA_METRICS_TOKEN = "t"
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").status_code == 200


def test_an_empty_token_setting_opens_nothing(client, settings):
    settings.PAGODA_METRICS_ALLOWED_IPS = []
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403


def test_networks_are_allowed(client, settings):
    settings.PAGODA_METRICS_ALLOWED_IPS = ["10.0.0.0/8", "2001:db8::/32"]
    assert client.get("/metrics", REMOTE_ADDR="10.200.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="11.0.0.1").status_code == 403


@pytest.mark.parametrize("address, entries, allowed", [
    ("127.0.0.1", ["127.0.0.1", "::1"], True),
    ("::1", ["127.0.0.1", "::1"], True),
    ("::ffff:127.0.0.1", ["127.0.0.1"], True),  # IPv4-mapped, as a dual-stack socket reports it
    ("[::1]", ["::1"], True),
    ("2001:db8::5", ["2001:db8::/32"], True),
    ("127.0.0.2", ["127.0.0.1"], False),
    ("10.0.0.1", ["2001:db8::/32"], False),
    ("", ["127.0.0.1"], False),
    ("not-an-ip", ["127.0.0.1"], False),
])
def test_address_allowed(address, entries, allowed):
    assert address_allowed(address, entries) is allowed


def test_openmetrics_when_asked(client):
    response = client.get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.rstrip().endswith(b"# EOF")
