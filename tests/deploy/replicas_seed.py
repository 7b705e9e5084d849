"""Migrate a fresh database and fill it for the replica tests and demo; prints what was made as JSON.

Run with the replicas' environment (DATABASE_URL, ...): `python tests/deploy/replicas_seed.py LONG_TOKENS`.
LONG_TOKENS is the length of the "long" profile's replies (ignore_eos), used to have replies in
flight when a replica is killed. Nothing here loads the engine: the replicas pin when they start.
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

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from api import services as api_services  # noqa: E402
from tenants import services  # noqa: E402
from tenants.models import Membership, SamplingProfile, Tenant  # noqa: E402

# Several KV blocks long, so a pin is a measurable number of blocks (a changed prompt changes it).
PROMPTS = {
    "acme": "You are the assistant of Acme Corporation. Answer briefly, politely and in plain English. " * 3,
    "globex": "You are Globex's internal assistant. Keep every answer short and factual. " * 3,
}
PASSWORDS = {"root": "root-pw-replicas", "erin": "erin-pw-replicas"}


def main(long_tokens: int) -> None:
    call_command("migrate", verbosity=0)
    User = get_user_model()
    root = User.objects.create_superuser(username="root", password=PASSWORDS["root"])
    erin = User.objects.create_user(username="erin", password=PASSWORDS["erin"])
    keys = {}
    for slug, prompt in PROMPTS.items():
        tenant = services.create_tenant(name=slug.title(), slug=slug)
        services.create_system_prompt(tenant, prompt)
        services.save_profile(SamplingProfile(tenant=tenant, name="terse", temperature=0.0, max_tokens=6,
                                              is_default=True))
        services.save_profile(SamplingProfile(tenant=tenant, name="long", temperature=0.0,
                                              max_tokens=long_tokens, ignore_eos=True))
        services.add_member(tenant, root, role=Membership.Role.ADMIN)
        keys[slug] = api_services.create_api_key(tenant, f"{slug} tool")[1]
    # erin is in two tenants: the routing cookie names the first by name (acme), as "New chat" does.
    services.add_member(Tenant.objects.get(slug="acme"), erin)
    services.add_member(services.create_tenant(name="Initech", slug="initech"), erin)  # no prompt
    print(json.dumps({"keys": keys, "prompts": PROMPTS, "passwords": PASSWORDS}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
