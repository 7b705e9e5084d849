"""API keys and API usage belong to the api app now (api.0001): they leave this app's state only; their
tables stay in the database, under the same names, owned by api's models."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("tenants", "0003_conversations_to_chat"),
        ("api", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ApiUsage"),
                migrations.DeleteModel(name="ApiKey"),
            ],
            database_operations=[],
        ),
    ]
