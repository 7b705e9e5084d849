"""Fill a fresh server database for the benchmark, through the project's manage.py commands (as
deploy/run.sh does: migrate, bootstrap) plus the tenants, key, user and sampling profile a run needs.

Run as `python -m benchmarks.serve.seed` in the server's environment (DATABASE_URL, PAGODA_VAR_DIR,
SECRET_KEY, ...) with SERVEBENCH_SEED, a JSON object {"output_len", "password", "system_prompt_file", "num_conversations"};
prints one JSON line: {"api_key", "pinned_api_key", "username", "profile", "conversations": [ids]}.
Each chat socket request gets a conversation of its own (a conversation's history would grow the
prompt); they are made here because "New chat" (POST /chat/new/) hands out the same untouched
conversation until its first turn is saved.

Tenants: "bench" has no system prompt (the throughput runs: a prompt is exactly the client's tokens,
and the cold side of the probe); "pinned" has the probe's long system prompt, which the server pins
when its engine starts. Both default to the profile "bench" (greedy, EOS ignored, max_tokens =
output_len): the chat socket takes its sampling from the profile alone.
"""
import io
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for path in (str(ROOT / "platform"), str(ROOT)):
    if path not in sys.path:
        sys.path.insert(0, path)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pagoda.settings")
os.environ["PAGODA_ENGINE"] = "off"  # seeding never loads the model

PROFILE = "bench"
USERNAME = "bench"


def _command(*args, **options) -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue().strip()


def _bench_profile(slug: str, output_len: int) -> None:
    from tenants import services
    from tenants.models import SamplingProfile, Tenant

    tenant = Tenant.objects.get(slug=slug)
    profile = SamplingProfile.objects.filter(tenant=tenant, name=PROFILE).first() or SamplingProfile(
        tenant=tenant, name=PROFILE)
    profile.temperature, profile.ignore_eos, profile.max_tokens, profile.is_default = 0.0, True, output_len, True
    services.save_profile(profile)


def main() -> None:
    import django

    django.setup()
    spec = json.loads(os.environ["SERVEBENCH_SEED"])
    _command("migrate", interactive=False, verbosity=0)
    _command("bootstrap")
    out = {"username": USERNAME, "profile": PROFILE}
    for slug in ("bench", "pinned"):
        _command("create_tenant", slug, exist_ok=True)
        _bench_profile(slug, spec["output_len"])
    _command("set_system_prompt", "pinned", file=spec["system_prompt_file"], no_engine=True,
             note="servebench probe")
    _command("add_member", "bench", USERNAME, create=True, password=spec["password"])
    from django.contrib.auth import get_user_model

    from chat import history
    from tenants.models import Tenant

    user, tenant = get_user_model().objects.get(username=USERNAME), Tenant.objects.get(slug="bench")
    user.set_password(spec["password"])  # this run's, also for a user an earlier run made (a reused --work-dir)
    user.save(update_fields=["password"])
    out["conversations"] = [history.create_conversation(tenant, user).pk
                            for _ in range(spec.get("num_conversations", 0))]
    out["api_key"] = _command("create_api_key", "bench", "servebench").splitlines()[-1]
    out["pinned_api_key"] = _command("create_api_key", "pinned", "servebench probe").splitlines()[-1]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
