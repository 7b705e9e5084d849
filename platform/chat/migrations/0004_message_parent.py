"""Messages become a tree (chat.branches): each one names the message it follows. Conversations written
before were single lines, so their parents follow from the order of their rows: a reply follows the user
message before it (so regenerated replies become siblings), a user message the message just before it."""

import django.db.models.deletion
from django.db import migrations, models

BATCH = 1000


def link_existing_messages(apps, schema_editor):
    Message = apps.get_model("chat", "Message")
    rows = (Message.objects.exclude(role="system").order_by("conversation_id", "created_at", "id")
            .only("id", "conversation_id", "role", "parent_id"))
    conversation_id = last_user_id = previous_id = None
    changed = []
    for message in rows.iterator(chunk_size=BATCH):
        if message.conversation_id != conversation_id:
            conversation_id, last_user_id, previous_id = message.conversation_id, None, None
        message.parent_id = last_user_id if message.role == "assistant" else previous_id
        changed.append(message)
        previous_id = message.id
        if message.role == "user":
            last_user_id = message.id
        if len(changed) >= BATCH:
            Message.objects.bulk_update(changed, ["parent"])
            changed = []
    if changed:
        Message.objects.bulk_update(changed, ["parent"])


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0003_feedback'),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='parent',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='children', to='chat.message'),
        ),
        migrations.RunPython(link_existing_messages, migrations.RunPython.noop),
    ]
