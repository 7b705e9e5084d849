"""Migrate a fresh database and fill it for the reliability runs; prints what it made as one JSON line.

Run with the server's environment (DATABASE_URL, ...) and RELIABILITY_SEED, a JSON object:
    {"num_users": 4, "num_conversations": 5, "max_tokens": 6, "long_tokens": 200}
num_users users in each of acme and globex (both with a system prompt), each with num_conversations
conversations and a logged-in session (the cookie a browser would send). north and south have no
system prompt (the prefix-cache timing test). Every tenant has an API key; the profiles ignore EOS, so
every reply is exactly max_tokens long ("quick", the default) or long_tokens long ("long").
With "superuser": true, a superuser "root" (password ROOT_PASSWORD) for the admin site.
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

from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.hashers import make_password  # noqa: E402
from django.contrib.sessions.backends.db import SessionStore  # noqa: E402
from django.core.management import call_command  # noqa: E402

from api import services as api_services  # noqa: E402
from chat import history  # noqa: E402
from tenants import services  # noqa: E402
from tenants.models import Membership, SamplingProfile  # noqa: E402

PROMPTS = {
    "acme": "You are the assistant of Acme Corporation. Answer briefly and politely. " * 2,
    "globex": "You are Globex's internal assistant. Keep every answer short and plain. " * 2,
}
ROOT_PASSWORD = "root-pw-reliability"


def _session(user) -> str:
    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    return store.session_key


def main() -> None:
    spec = json.loads(os.environ.get("RELIABILITY_SEED") or "{}")
    num_users, num_conversations = spec.get("num_users", 2), spec.get("num_conversations", 2)
    call_command("migrate", verbosity=0)
    password = make_password("pw")  # one hash for every user: hashing is the slow part of seeding
    out: dict = {"keys": {}, "users": [], "prompts": PROMPTS, "tenants": {}}
    for slug in ("acme", "globex", "north", "south"):
        tenant = services.create_tenant(name=slug.title(), slug=slug)
        out["tenants"][slug] = tenant.pk
        if slug in PROMPTS:
            services.create_system_prompt(tenant, PROMPTS[slug])
        services.save_profile(SamplingProfile(tenant=tenant, name="quick", temperature=0.0, ignore_eos=True,
                                              max_tokens=spec.get("max_tokens", 6), is_default=True))
        services.save_profile(SamplingProfile(tenant=tenant, name="long", temperature=0.0, ignore_eos=True,
                                              max_tokens=spec.get("long_tokens", 200)))
        key, plaintext = api_services.create_api_key(tenant, f"{slug} tool")
        out["keys"][slug] = {"id": key.pk, "tenant_id": tenant.pk, "plaintext": plaintext}
        if slug not in PROMPTS:
            continue
        for i in range(num_users):
            user = get_user_model().objects.create(username=f"{slug}-user-{i}", password=password)
            services.add_member(tenant, user, role=Membership.Role.MEMBER)
            conversations = [history.create_conversation(tenant, user).pk for _ in range(num_conversations)]
            out["users"].append({"username": user.username, "id": user.pk, "tenant": slug,
                                 "session": _session(user), "conversations": conversations})
    if spec.get("superuser"):
        get_user_model().objects.create_superuser(username="root", password=ROOT_PASSWORD)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
