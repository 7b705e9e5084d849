from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0004_message_parent'),
    ]

    operations = [
        migrations.AddField(
            model_name='conversation',
            name='reply_lock_owner',
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name='conversation',
            name='reply_lock_expires_at',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
    ]
