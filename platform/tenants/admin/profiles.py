from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from tenants import services
from tenants.admin.scoping import TenantScopedAdmin, adopt
from tenants.models import SamplingProfile


@admin.register(SamplingProfile)
class SamplingProfileAdmin(TenantScopedAdmin):
    list_display = ["name", "tenant", "is_default", "temperature", "top_p", "top_k", "max_tokens", "is_builtin"]
    list_filter = ["is_default", "is_builtin", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["name", "description"]
    actions = ["make_default"]
    readonly_fields = ["is_builtin", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["tenant", "name", "description", "is_default", "is_builtin"]}),
        ("Sampling", {"fields": ["temperature", "top_p", "top_k", "min_p", "seed"]}),
        ("Penalties", {"fields": ["repetition_penalty", "presence_penalty", "frequency_penalty"]}),
        ("Length and stopping", {"fields": ["max_tokens", "min_tokens", "stop", "stop_token_ids", "ignore_eos"]}),
        ("Advanced", {"fields": ["n", "logprobs", "created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    def get_list_filter(self, request):
        return self.list_filter if request.user.is_superuser else ["is_default", "is_builtin"]

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "tenant"] if obj else self.readonly_fields

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.is_default:
            return False  # make another profile the default first
        return super().has_delete_permission(request, obj)

    def save_model(self, request, obj, form, change):
        adopt(obj, services.save_profile(obj, actor=request.user))

    def delete_model(self, request, obj):
        services.delete_profile(obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for profile in queryset:
            try:
                services.delete_profile(profile, actor=request.user)
            except ValidationError as exc:
                self.message_user(request, f"{profile}: {' '.join(exc.messages)}", messages.ERROR)

    @admin.action(description="Make the selected profile its tenant's default")
    def make_default(self, request, queryset):
        for profile in queryset:
            services.set_default_profile(profile, actor=request.user)
