from django.contrib import admin
from django.utils.html import format_html_join

from tenants import audit
from tenants.admin.scoping import ReadOnlyAdmin
from tenants.models import AuditLog


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "actor_repr", "tenant", "action", "object_repr"]
    list_filter = ["action", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["actor_repr", "object_repr", "action"]
    date_hierarchy = "created_at"
    fields = ["created_at", "actor_repr", "tenant", "action", "object_type", "object_id", "object_repr", "changes"]
    readonly_fields = fields

    def get_list_filter(self, request):
        return self.list_filter if request.user.is_superuser else ["action"]

    @admin.display(description="changes")
    def changes(self, obj):
        rows = audit.changed_fields(obj.before, obj.after).items()
        return format_html_join("\n", "<div><b>{}</b>: {} → {}</div>", ((k, old, new) for k, (old, new) in rows))
