"""Tenant console: thin views that check access, call selectors/services and render."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponseForbidden, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.crypto import constant_time_compare
from django.views.decorators.http import require_POST

from api import selectors as api_selectors
from chat import reply_quality
from console import panels
from console.forms import SystemPromptForm
from governance import selectors as governance_selectors
from tenants import pinning, selectors, services
from tenants.decorators import tenant_admin_required
from tenants.models import SystemPrompt, Tenant


@login_required
def index(request):
    tenants = selectors.admin_tenants_for_user(request.user)
    if len(tenants) == 1 and not request.user.is_superuser:
        return redirect("console:tenant", slug=tenants[0].slug)
    rates = panels.tenant_hit_rates(tenants)
    rows = [{"tenant": t, "cache": rates.get(t.pk)} for t in tenants]
    return render(request, "console/index.html", {"tenants": tenants, "rows": rows, "engine_running": bool(rates)})


def _tenant_context(tenant: Tenant, prompt_form: SystemPromptForm | None = None) -> dict:
    active = selectors.active_system_prompt(tenant)
    return {
        "tenant": tenant,
        "active_prompt": active,
        "pin": pinning.pin_status(tenant),
        "history": selectors.system_prompt_history(tenant)[:20],
        "profiles": selectors.profiles(tenant),
        "members": selectors.members(tenant),
        "usage": governance_selectors.usage_overview(tenant, days=14),  # the ledger: chat replies and /v1 calls
        "quality_by_version": reply_quality.by_prompt_version(tenant),  # thumbs, length, TTFT of the chat's replies
        "quality_by_profile": reply_quality.by_profile(tenant),
        "api_usage_by_key": governance_selectors.api_usage_by_key(tenant, days=14),
        "spend": governance_selectors.spend_against_budgets(tenant),
        "api_keys": api_selectors.api_keys(tenant),
        "audit": selectors.audit_log(tenant, limit=15),
        "prompt_form": prompt_form or SystemPromptForm(initial={"text": active.text if active else ""}),
    }


@tenant_admin_required
def tenant_page(request, tenant: Tenant):
    return render(request, "console/tenant.html", _tenant_context(tenant))


@tenant_admin_required
def tenant_engine_json(request, tenant: Tenant):
    return JsonResponse(panels.tenant_panel(tenant))


@require_POST
@tenant_admin_required
def save_prompt(request, tenant: Tenant):
    form = SystemPromptForm(request.POST)
    if form.is_valid():
        try:
            prompt = services.create_system_prompt(
                tenant, form.cleaned_data["text"], actor=request.user, note=form.cleaned_data["note"]
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for error in errors:
                    form.add_error(field if field in form.fields else None, error)
        else:
            messages.success(request, f"Saved and activated version {prompt.version}.")
            return redirect("console:tenant", slug=tenant.slug)
    return render(request, "console/tenant.html", _tenant_context(tenant, form), status=400)


@require_POST
@tenant_admin_required
def activate_prompt(request, tenant: Tenant, version: int):
    prompt = get_object_or_404(SystemPrompt, tenant=tenant, version=version)
    try:
        services.activate_system_prompt(prompt, actor=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Version {version} is active.")
    return redirect("console:tenant", slug=tenant.slug)


@require_POST
@tenant_admin_required
def deactivate_prompt(request, tenant: Tenant):
    services.deactivate_system_prompt(tenant, actor=request.user)
    messages.success(request, "The tenant has no active system prompt now.")
    return redirect("console:tenant", slug=tenant.slug)


def engine_stats_json(request):
    """The whole engine's numbers and pins: for superusers, and for `manage.py engine_stats`, which
    proves it shares the server's SECRET_KEY with the STATS_TOKEN_HEADER header."""
    token = request.headers.get(panels.STATS_TOKEN_HEADER, "")
    if not (request.user.is_superuser or constant_time_compare(token, panels.stats_token())):
        return HttpResponseForbidden("superusers only")
    return JsonResponse(panels.engine_stats())
