from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from tenants import pinning, services
from tenants.admin.scoping import TenantScopedAdmin, adopt
from tenants.models import SystemPrompt


class SystemPromptForm(forms.ModelForm):
    activate = forms.BooleanField(initial=True, required=False, help_text="Make this version the active one.")

    class Meta:
        model = SystemPrompt
        fields = ["tenant", "text", "note"]

    def clean_text(self):
        text = self.cleaned_data["text"]
        try:
            self.num_tokens = services.validate_system_prompt_text(text)
        except ValidationError as exc:  # raised as {"text": [...]}: show it under the field
            raise ValidationError(exc.message_dict.get("text", exc.messages)) from exc
        return text


@admin.register(SystemPrompt)
class SystemPromptAdmin(TenantScopedAdmin):
    """Versions are immutable: "add" saves a new version; actions activate (roll back) or deactivate."""

    form = SystemPromptForm
    tenant_admin_can_delete = False
    list_display = ["tenant", "version", "is_active", "num_tokens", "pin", "note", "created_by", "created_at"]
    list_filter = ["is_active", "tenant"]
    list_select_related = ["tenant", "created_by"]
    search_fields = ["text", "note"]
    actions = ["activate_selected", "deactivate_tenant_prompt"]

    def get_list_filter(self, request):
        return self.list_filter if request.user.is_superuser else ["is_active"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # the history is kept

    def has_change_permission(self, request, obj=None) -> bool:
        # A saved version is read-only; activation happens through the list's actions.
        return obj is None and super().has_change_permission(request)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["tenant", "text", "note", "activate"]
        return ["tenant", "version", "is_active", "num_tokens", "text", "note", "created_by", "created_at"]

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj) if obj else []

    @admin.display(description="pinned")
    def pin(self, obj) -> str:
        if not obj.is_active:
            return ""
        state = pinning.pin_status(obj.tenant)
        if not state["engine"]:
            return "engine not running"
        return "yes" if state["pinned"] else (state["error"] or "no")

    def save_model(self, request, obj, form, change):
        prompt = services.create_system_prompt(
            obj.tenant, obj.text, actor=request.user, note=obj.note, activate=form.cleaned_data.get("activate", True)
        )
        adopt(obj, prompt)

    def _report(self, request, func, *args) -> bool:
        """Run a service; a ValidationError becomes an error message. True when it succeeded."""
        try:
            func(*args, actor=request.user)
        except ValidationError as exc:
            self.message_user(request, " ".join(exc.messages), messages.ERROR)
            return False
        return True

    @admin.action(description="Activate the selected version (roll back)")
    def activate_selected(self, request, queryset):
        prompts = list(queryset)
        if len({p.tenant_id for p in prompts}) != len(prompts):
            self.message_user(request, "Select at most one version per tenant.", messages.ERROR)
            return
        for prompt in prompts:
            if self._report(request, services.activate_system_prompt, prompt):
                self.message_user(request, f"{prompt.tenant}: version {prompt.version} is active.")

    @admin.action(description="Deactivate the tenant's system prompt (no prompt)")
    def deactivate_tenant_prompt(self, request, queryset):
        for tenant in {p.tenant for p in queryset}:
            if self._report(request, services.deactivate_system_prompt, tenant):
                self.message_user(request, f"{tenant}: no active system prompt.")
