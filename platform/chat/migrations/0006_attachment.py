import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0005_conversation_reply_lock'),
    ]

    operations = [
        migrations.CreateModel(
            name='Attachment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=255)),
                ('kind', models.CharField(choices=[('text', 'Plain text'), ('markdown', 'Markdown'), ('pdf', 'PDF'), ('docx', 'Word (DOCX)')], max_length=16)),
                ('size_bytes', models.PositiveIntegerField()),
                ('text', models.TextField()),
                ('num_tokens', models.PositiveIntegerField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='attachments', to='chat.conversation')),
                ('message', models.ForeignKey(blank=True, help_text='The user message it was sent with; empty while a draft.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='attachments', to='chat.message')),
            ],
            options={
                'ordering': ['created_at', 'id'],
            },
        ),
    ]
