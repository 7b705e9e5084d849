"""Run by test_upgrade.py in a fresh process, on the database named by DATABASE_URL (empty):

1. migrates it to the schema the tenants app had while it held every table (OLD_STATE), through the
   migration executor, as a database created by that code would be (content types included);
2. inserts rows in every table that has since moved to another app, through the models of that state;
3. runs `manage.py migrate` as an upgrade does;
4. prints JSON: the rows as inserted, the same rows read through today's models, and the content types.
With --makemigrations it first runs `makemigrations --check --dry-run` and reports its exit status.
"""
import json
import sys

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.migrations.executor import MigrationExecutor  # noqa: E402
from django.utils import timezone  # noqa: E402

OLD_STATE = [("tenants", "0002_api_usage"), ("contenttypes", "0002_remove_content_type_name"),
             ("auth", "0012_alter_user_first_name_max_length")]
# Each moved model: (old app, new app, model name).
MOVED = [("tenants", "chat", "Conversation"), ("tenants", "chat", "Message"),
         ("tenants", "api", "ApiKey"), ("tenants", "api", "ApiUsage")]


def rows(model) -> list[dict]:
    return json.loads(json.dumps(list(model.objects.order_by("pk").values()), default=str))


def build_old_database() -> dict:
    executor = MigrationExecutor(connection)
    executor.migrate(OLD_STATE)  # no post_migrate: today's models must not add their content types
    old = executor.loader.project_state(OLD_STATE).apps
    model = old.get_model
    user = model("auth", "User").objects.create(username="ada")
    tenant = model("tenants", "Tenant").objects.create(name="Acme", slug="acme")
    model("tenants", "Membership").objects.create(user=user, tenant=tenant, role="admin")
    profile = model("tenants", "SamplingProfile").objects.create(tenant=tenant, name="quick", temperature=0.2)
    prompt = model("tenants", "SystemPrompt").objects.create(tenant=tenant, version=1, text="Be brief.", is_active=True)
    conversation = model("tenants", "Conversation").objects.create(tenant=tenant, user=user, title="Expenses",
                                                                   profile=profile)
    model("tenants", "Message").objects.create(conversation=conversation, role="user", content="How?")
    model("tenants", "Message").objects.create(
        conversation=conversation, role="assistant", content="Use the form.", status="complete", finish_reason="stop",
        request_id="chat-1", profile=profile, system_prompt=prompt, num_prompt_tokens=12, num_cached_tokens=8,
        num_output_tokens=4, time_to_first_token_ms=30, duration_ms=90, completed_at=timezone.now())
    key = model("tenants", "ApiKey").objects.create(tenant=tenant, name="wiki bot", prefix="pgd-abcdefgh",
                                                    hashed_key="0" * 64, rpm_limit=60, created_by=user)
    model("tenants", "ApiUsage").objects.create(
        tenant=tenant, api_key=key, profile=profile, endpoint="chat.completions", model="quick", request_id="api-1",
        stream=True, status_code=200, finish_reason="length", num_prompt_tokens=20, num_output_tokens=5,
        latency_ms=120, time_to_first_token_ms=15)
    # What post_migrate made for the old models, and what points at their content types.
    content_type = model("contenttypes", "ContentType")
    types = {name: content_type.objects.create(app_label="tenants", model=name.lower()) for _, _, name in MOVED}
    model("auth", "Permission").objects.create(name="Can view API key", codename="view_apikey",
                                               content_type=types["ApiKey"])
    model("tenants", "AuditLog").objects.create(action="api_key.create", tenant=tenant, object_type="tenants.apikey",
                                                object_id=str(key.pk), object_repr="wiki bot")
    return {
        "rows": {name: rows(model(old_app, name)) for old_app, _, name in MOVED},
        "content_type_ids": {name: ct.pk for name, ct in types.items()},
    }


def read_upgraded() -> dict:
    from django.apps import apps
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    from tenants.models import AuditLog

    read = {name: rows(apps.get_model(new_app, name)) for _, new_app, name in MOVED}
    Message = apps.get_model("chat", "Message")
    ApiUsage = apps.get_model("api", "ApiUsage")
    reply = Message.objects.select_related("conversation__tenant", "system_prompt").get(role="assistant")
    usage = ApiUsage.objects.select_related("api_key__tenant").get()
    # A new row after the upgrade: its id continues the table's sequence.
    newer = Message.objects.create(conversation=reply.conversation, role="user", content="And then?")
    return {
        "rows": read,
        "through_relations": [reply.conversation.tenant.slug, reply.system_prompt.text, usage.api_key.name],
        "new_id_after": [newer.pk, max(row["id"] for row in read["Message"])],
        "content_types": {f"{ct.app_label}.{ct.model}": ct.pk for ct in ContentType.objects.filter(
            model__in=[name.lower() for _, _, name in MOVED])},
        "permission_apps": sorted(p.content_type.app_label for p in Permission.objects.filter(codename="view_apikey")),
        "audit_object_types": sorted(AuditLog.objects.values_list("object_type", flat=True)),
    }


def main() -> None:
    result = {}
    if "--makemigrations" in sys.argv:
        try:
            call_command("makemigrations", "--check", "--dry-run", verbosity=0)
            result["makemigrations_exit"] = 0
        except SystemExit as exc:
            result["makemigrations_exit"] = exc.code
    result["before"] = build_old_database()
    call_command("migrate", interactive=False, verbosity=0)
    result["after"] = read_upgraded()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
