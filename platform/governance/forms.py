from django import forms
from django.contrib.auth import get_user_model

from governance.models import Budget


class BudgetForm(forms.Form):
    """A budget as the console sets it; `user` is picked among the tenant's members."""

    scope = forms.ChoiceField(choices=Budget.Scope.choices)
    user = forms.ModelChoiceField(queryset=get_user_model().objects.none(), required=False)
    period = forms.ChoiceField(choices=Budget.Period.choices)
    source = forms.ChoiceField(choices=Budget.Source.choices)
    max_tokens = forms.IntegerField(min_value=1, max_value=10**15)

    def __init__(self, *args, tenant, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["user"].queryset = get_user_model().objects.filter(memberships__tenant=tenant).order_by("username")


class RetentionForm(forms.Form):
    retention_days = forms.IntegerField(min_value=1, max_value=36500, required=False,
                                        help_text="Empty: keep conversations until their owner deletes them.")
