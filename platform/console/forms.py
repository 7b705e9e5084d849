from django import forms


class SystemPromptForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 8}), strip=False)
    note = forms.CharField(max_length=200, required=False, help_text="What changed in this version.")
