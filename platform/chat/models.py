"""The chat app's tables: conversations and their messages. Writes go through chat.history."""
from django.conf import settings
from django.db import models

from tenants.models import SamplingProfile, SystemPrompt, Tenant


class Conversation(models.Model):
    """One user's chat thread inside one tenant."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="conversations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    profile = models.ForeignKey(SamplingProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    is_pinned = models.BooleanField(default=False, help_text="Shown at the top of its owner's sidebar.")
    # One reply at a time per conversation, across tabs and processes (chat.turn_lock): the socket whose
    # turn holds it, and until when; a holder that died leaves it to expire.
    reply_lock_owner = models.CharField(max_length=64, blank=True, editable=False)
    reply_lock_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "tenants_conversation"  # named for the tenants app: keeping the name kept the move state-only
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["tenant", "user", "-updated_at"], name="conversation_sidebar_idx")]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class Message(models.Model):
    """One turn. Assistant replies carry the token usage of the engine request that produced them."""

    class Role(models.TextChoices):
        SYSTEM = "system", "System"
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"

    class Status(models.TextChoices):
        PENDING = "pending", "Generating"  # saved before the reply streams, so a dropped socket loses nothing
        COMPLETE = "complete", "Complete"
        STOPPED = "stopped", "Stopped"  # the user stopped it or closed the tab; content is the partial reply
        ERROR = "error", "Error"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    # The message this one follows (chat.branches): a reply's user message, a user message's reply before
    # it. Siblings are regenerated replies or edited messages; null for a first message (and its edits).
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    finish_reason = models.CharField(max_length=16, blank=True, help_text="stop | length | abort, from the engine.")
    error = models.TextField(blank=True)
    request_id = models.CharField(max_length=64, blank=True, help_text="The engine request that produced it.")
    profile = models.ForeignKey(SamplingProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    system_prompt = models.ForeignKey(
        SystemPrompt, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    num_prompt_tokens = models.PositiveIntegerField(default=0)
    num_cached_tokens = models.PositiveIntegerField(default=0)
    num_output_tokens = models.PositiveIntegerField(default=0)
    time_to_first_token_ms = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "tenants_message"  # as Conversation's table
        ordering = ["conversation", "created_at", "id"]
        indexes = [models.Index(fields=["conversation", "created_at"], name="message_thread_idx")]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"

    @property
    def num_total_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens


class Feedback(models.Model):
    """A user's thumbs up or down on one assistant reply, with an optional comment. One per user per
    reply, changed in place (chat.feedback writes it); the console sums them per prompt version and
    per sampling profile (chat.reply_quality)."""

    class Rating(models.IntegerChoices):
        UP = 1, "Thumbs up"
        DOWN = -1, "Thumbs down"

    MAX_COMMENT_CHARS = 2000

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="feedback")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    rating = models.SmallIntegerField(choices=Rating.choices)
    comment = models.TextField(blank=True, max_length=MAX_COMMENT_CHARS)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["message", "user"], name="feedback_one_per_user_and_reply")]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} on message {self.message_id}"


class Attachment(models.Model):
    """A file attached to a user message: its text, extracted on upload (chat.attachments), goes to the
    model with the message. Uploaded before the message is sent, it waits with no message (a draft)."""

    class Kind(models.TextChoices):
        TEXT = "text", "Plain text"
        MARKDOWN = "markdown", "Markdown"
        PDF = "pdf", "PDF"
        DOCX = "docx", "Word (DOCX)"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="attachments")
    message = models.ForeignKey(Message, null=True, blank=True, on_delete=models.CASCADE, related_name="attachments",
                                help_text="The user message it was sent with; empty while a draft.")
    name = models.CharField(max_length=255)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    size_bytes = models.PositiveIntegerField()
    text = models.TextField()
    num_tokens = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.name
