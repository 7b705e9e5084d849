from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from tenants.models import Membership


class InviteForm(forms.Form):
    email = forms.EmailField(required=False, help_text="Where you will send the link; matched at a single sign-on login.")
    username = forms.CharField(max_length=150, required=False,
                               help_text="Their directory login name, if they will sign in through it.")
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)

    def clean(self):
        data = super().clean()
        if not (data.get("email") or data.get("username")):
            raise forms.ValidationError("Give the person's e-mail address, their username, or both.")
        return data


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Membership.Role.choices)


class NewAccountForm(UserCreationForm):
    """The account a person makes from an invitation link: username, e-mail, password twice."""

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")
