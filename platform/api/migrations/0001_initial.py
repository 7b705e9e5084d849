"""API keys and API usage move from the tenants app to api: a change of owner, not of data.

The tables keep their names (Meta.db_table), so the database is left as it is; only Django's state
changes (tenants.0004 drops the models from its state after this adds them here). The content types
follow, so admin history and permissions that point at them stay attached, and the audit log's
object_type of the keys' entries names the model where it now lives.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ("apikey", "apiusage")


def move(apps, schema_editor, old: str = "tenants", new: str = "api"):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not content_type.objects.filter(app_label=new, model=model).exists():
            content_type.objects.filter(app_label=old, model=model).update(app_label=new)
    audit_log = apps.get_model("tenants", "AuditLog")
    for model in MOVED:
        audit_log.objects.filter(object_type=f"{old}.{model}").update(object_type=f"{new}.{model}")


def move_back(apps, schema_editor):
    move(apps, schema_editor, old="api", new="tenants")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        ("tenants", "0003_conversations_to_chat"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ApiKey",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=100)),
                        ("prefix", models.CharField(db_index=True, editable=False, max_length=16)),
                        ("hashed_key", models.CharField(editable=False, max_length=64, unique=True)),
                        ("rpm_limit", models.PositiveIntegerField(blank=True, help_text="Requests per minute; empty: no limit.", null=True)),
                        ("tpm_limit", models.PositiveIntegerField(blank=True, help_text="Tokens per minute; empty: no limit.", null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        ("created_by", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL)),
                        ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="api_keys", to="tenants.tenant")),
                    ],
                    options={
                        "verbose_name": "API key",
                        "db_table": "tenants_apikey",
                        "ordering": ["tenant", "-created_at"],
                    },
                ),
                migrations.CreateModel(
                    name="ApiUsage",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("endpoint", models.CharField(help_text="chat.completions | completions | models", max_length=32)),
                        ("model", models.CharField(blank=True, help_text="The `model` the client asked for.", max_length=100)),
                        ("request_id", models.CharField(blank=True, max_length=64)),
                        ("stream", models.BooleanField(default=False)),
                        ("status_code", models.PositiveSmallIntegerField()),
                        ("error_code", models.CharField(blank=True, help_text="The OpenAI-style error code, if any.", max_length=64)),
                        ("finish_reason", models.CharField(blank=True, help_text="stop | length | abort", max_length=16)),
                        ("num_prompt_tokens", models.PositiveIntegerField(default=0)),
                        ("num_cached_tokens", models.PositiveIntegerField(default=0)),
                        ("num_output_tokens", models.PositiveIntegerField(default=0)),
                        ("latency_ms", models.PositiveIntegerField(blank=True, help_text="From the request to its last byte.", null=True)),
                        ("time_to_first_token_ms", models.PositiveIntegerField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("api_key", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="usage", to="api.apikey")),
                        ("profile", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="tenants.samplingprofile")),
                        ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="api_usage", to="tenants.tenant")),
                    ],
                    options={
                        "verbose_name": "API usage record",
                        "db_table": "tenants_apiusage",
                        "ordering": ["-created_at", "-id"],
                        "indexes": [models.Index(fields=["tenant", "created_at"], name="api_usage_tenant_idx"), models.Index(fields=["api_key", "created_at"], name="api_usage_key_idx")],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move, move_back),
    ]
