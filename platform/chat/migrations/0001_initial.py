"""Conversations and messages move from the tenants app to chat: a change of owner, not of data.

The tables keep their names (Meta.db_table), so the database is left as it is; only Django's state
changes (tenants.0003 drops the models from its state after this adds them here). The content types
follow, so admin history and permissions that point at them stay attached.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ("conversation", "message")


def move_content_types(apps, schema_editor, old: str = "tenants", new: str = "chat"):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not content_type.objects.filter(app_label=new, model=model).exists():
            content_type.objects.filter(app_label=old, model=model).update(app_label=new)


def move_content_types_back(apps, schema_editor):
    move_content_types(apps, schema_editor, old="chat", new="tenants")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        ("tenants", "0002_api_usage"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Conversation",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("title", models.CharField(blank=True, max_length=200)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        ("profile", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="tenants.samplingprofile")),
                        ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="conversations", to="tenants.tenant")),
                        ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="conversations", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        "db_table": "tenants_conversation",
                        "ordering": ["-updated_at"],
                        "indexes": [models.Index(fields=["tenant", "user", "-updated_at"], name="conversation_sidebar_idx")],
                    },
                ),
                migrations.CreateModel(
                    name="Message",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("role", models.CharField(choices=[("system", "System"), ("user", "User"), ("assistant", "Assistant")], max_length=16)),
                        ("content", models.TextField(blank=True)),
                        ("status", models.CharField(choices=[("pending", "Generating"), ("complete", "Complete"), ("stopped", "Stopped"), ("error", "Error")], default="complete", max_length=16)),
                        ("finish_reason", models.CharField(blank=True, help_text="stop | length | abort, from the engine.", max_length=16)),
                        ("error", models.TextField(blank=True)),
                        ("request_id", models.CharField(blank=True, help_text="The engine request that produced it.", max_length=64)),
                        ("num_prompt_tokens", models.PositiveIntegerField(default=0)),
                        ("num_cached_tokens", models.PositiveIntegerField(default=0)),
                        ("num_output_tokens", models.PositiveIntegerField(default=0)),
                        ("time_to_first_token_ms", models.PositiveIntegerField(blank=True, null=True)),
                        ("duration_ms", models.PositiveIntegerField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("completed_at", models.DateTimeField(blank=True, null=True)),
                        ("conversation", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="messages", to="chat.conversation")),
                        ("profile", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="tenants.samplingprofile")),
                        ("system_prompt", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="tenants.systemprompt")),
                    ],
                    options={
                        "db_table": "tenants_message",
                        "ordering": ["conversation", "created_at", "id"],
                        "indexes": [models.Index(fields=["conversation", "created_at"], name="message_thread_idx")],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_types, move_content_types_back),
    ]
