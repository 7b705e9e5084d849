"""Migrate a fresh database and fill it for the live-server tests; prints the API keys as JSON.

Run with the live server's environment (DATABASE_URL, ...): `python tests/api/api_live_seed.py`.
Nothing here loads the engine: the server pins the system prompts when it starts.
"""
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pagoda.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from api import services as api_services  # noqa: E402
from tenants import services  # noqa: E402
from tenants.models import SamplingProfile  # noqa: E402

# Long enough to fill several 16-token KV blocks, so the pinned prefix is a measurable cache hit.
ACME_PROMPT = "You are the assistant of Acme Corporation. Answer briefly, politely and in plain English. " * 3
GLOBEX_PROMPT = "You are Globex's internal assistant. Never discuss Acme. Keep every answer short. " * 3


def main() -> None:
    call_command("migrate", verbosity=0)
    acme = services.create_tenant(name="Acme", slug="acme")
    services.create_system_prompt(acme, ACME_PROMPT)
    services.save_profile(SamplingProfile(tenant=acme, name="terse", temperature=0.0, max_tokens=8))
    globex = services.create_tenant(name="Globex", slug="globex")
    services.create_system_prompt(globex, GLOBEX_PROMPT)
    services.save_profile(SamplingProfile(tenant=globex, name="globex-only", temperature=0.0, max_tokens=8))
    initech = services.create_tenant(name="Initech", slug="initech")  # no system prompt

    keys = {}
    for name, tenant, limits in [
        ("acme", acme, {}),
        ("acme_rpm2", acme, {"rpm_limit": 2}),
        ("acme_revoked", acme, {}),
        ("globex", globex, {}),
        ("initech", initech, {}),
    ]:
        key, plaintext = api_services.create_api_key(tenant, name, **limits)
        keys[name] = {"id": key.pk, "tenant_id": tenant.pk, "plaintext": plaintext}
        if name.endswith("_revoked"):
            api_services.revoke_api_key(key)
    print(json.dumps({"keys": keys, "prompts": {"acme": ACME_PROMPT, "globex": GLOBEX_PROMPT}}))


if __name__ == "__main__":
    main()
