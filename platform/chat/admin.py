"""Chat history in the admin site, view only, scoped to the tenants a tenant admin administers."""
from django.contrib import admin

from chat.models import Conversation, Feedback, Message
from tenants.admin.scoping import ReadOnlyAdmin


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    can_delete = False
    fields = ["role", "status", "content", "num_prompt_tokens", "num_cached_tokens", "num_output_tokens", "created_at"]
    readonly_fields = fields
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    """Chat history, view only (chats are written by the chat app and the API, not edited here)."""

    list_display = ["__str__", "user", "tenant", "created_at", "updated_at"]
    list_filter = ["tenant"]
    list_select_related = ["user", "tenant"]
    search_fields = ["title", "user__username"]
    inlines = [MessageInline]

    def get_list_filter(self, request):
        return self.list_filter if request.user.is_superuser else []


@admin.register(Feedback)
class FeedbackAdmin(ReadOnlyAdmin):
    """Thumbs and comments on replies, view only; a tenant admin sees their tenants' (the console sums them)."""

    tenant_field = "message__conversation__tenant"
    list_display = ["created_at", "rating", "comment", "user", "reply_profile", "reply_prompt_version"]
    list_filter = ["rating"]
    list_select_related = ["user", "message__profile", "message__system_prompt"]
    search_fields = ["comment"]

    @admin.display(description="profile")
    def reply_profile(self, feedback: Feedback) -> str:
        return feedback.message.profile.name if feedback.message.profile else "–"

    @admin.display(description="prompt version")
    def reply_prompt_version(self, feedback: Feedback) -> str:
        prompt = feedback.message.system_prompt
        return f"v{prompt.version}" if prompt else "–"
