"""Governance pages: the console's budgets, retention and usage export (tenant admins), and the
employee's own export and erasure under /chat/. Thin: parse, call a service or selector, render."""
from __future__ import annotations

import io

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from tenants.decorators import tenant_admin_required
from governance import personal_data, retention, selectors, services, usage_csv
from governance.forms import BudgetForm, RetentionForm
from governance.models import Budget, RetentionPolicy
from tenants.models import Tenant

DELETE_ALL_CONFIRMATION = "DELETE"


# --- console (tenant admins) --------------------------------------------------------------------------
def _budgets_page(request, tenant: Tenant, form: BudgetForm | None = None, status: int = 200):
    policy = RetentionPolicy.objects.filter(tenant=tenant).first()
    return render(request, "governance/budgets.html", {
        "tenant": tenant,
        "spend": selectors.spend_against_budgets(tenant),
        "form": form or BudgetForm(tenant=tenant),
        "retention_form": RetentionForm(initial={"retention_days": policy.retention_days if policy else None}),
        "policy": policy,
        "this_month": timezone.localdate().strftime("%Y-%m"),
    }, status=status)


@tenant_admin_required
def budgets(request, tenant: Tenant):
    if request.method != "POST":
        return _budgets_page(request, tenant)
    form = BudgetForm(request.POST, tenant=tenant)
    if form.is_valid():
        data = form.cleaned_data
        try:
            services.set_budget(tenant, scope=data["scope"], user=data["user"], period=data["period"],
                                source=data["source"], max_tokens=data["max_tokens"], actor=request.user)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for error in errors:
                    form.add_error(field if field in form.fields else None, error)
        else:
            messages.success(request, "Budget saved.")
            return redirect("governance:budgets", slug=tenant.slug)
    return _budgets_page(request, tenant, form, status=400)


@require_POST
@tenant_admin_required
def delete_budget(request, tenant: Tenant, budget_id: int):
    services.delete_budget(get_object_or_404(Budget, pk=budget_id, tenant=tenant), actor=request.user)
    messages.success(request, "Budget removed.")
    return redirect("governance:budgets", slug=tenant.slug)


@require_POST
@tenant_admin_required
def set_retention(request, tenant: Tenant):
    form = RetentionForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
    else:
        retention.set_retention(tenant, form.cleaned_data["retention_days"], actor=request.user)
        messages.success(request, "Retention period saved.")
    return redirect("governance:budgets", slug=tenant.slug)


@require_GET
@tenant_admin_required
def usage_export(request, tenant: Tenant):
    """GET ?month=YYYY-MM (default: this month): the tenant's ledger of that month as CSV."""
    month = request.GET.get("month") or timezone.localdate().strftime("%Y-%m")
    out = io.StringIO()
    try:
        usage_csv.write_month(out, tenant.pk, month)
    except ValueError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="usage-{tenant.slug}-{month}.csv"'
    return response


# --- the employee's own data ----------------------------------------------------------------------------
@require_GET
@login_required
def export_all(request):
    return _json_download(personal_data.export_user(request.user), "pagoda-conversations.json")


@require_GET
@login_required
def export_one(request, conversation_id: int):
    data = personal_data.export_user(request.user, conversation_id)
    if data is None:  # not theirs, or gone: the same answer, so ids of others' conversations tell nothing
        raise Http404("No such conversation")
    return _json_download(data, f"pagoda-conversation-{conversation_id}.json")


def _json_download(data: dict, filename: str) -> JsonResponse:
    response = JsonResponse(data, json_dumps_params={"ensure_ascii": False, "indent": 1})
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
def delete_all(request):
    """GET: the confirmation page; POST with confirm=DELETE: erase every conversation of the user."""
    if request.method == "POST":
        if request.POST.get("confirm", "").strip() != DELETE_ALL_CONFIRMATION:
            return render(request, "governance/delete_all.html",
                          {"error": f"Type {DELETE_ALL_CONFIRMATION} to confirm.", "confirmation": DELETE_ALL_CONFIRMATION},
                          status=400)
        count = personal_data.delete_all_conversations(request.user)
        messages.success(request, f"Deleted {count} conversation(s).")
        return redirect("chat:index")
    count = personal_data.count_conversations(request.user)
    return render(request, "governance/delete_all.html", {"count": count, "confirmation": DELETE_ALL_CONFIRMATION})
