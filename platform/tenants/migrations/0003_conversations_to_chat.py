"""Conversations and messages belong to the chat app now (chat.0001): they leave this app's state only;
their tables stay in the database, under the same names, owned by chat's models."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("tenants", "0002_api_usage"),
        ("chat", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="Message"),
                migrations.DeleteModel(name="Conversation"),
            ],
            database_operations=[],
        ),
    ]
