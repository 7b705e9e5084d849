from django.apps import AppConfig


class PeopleConfig(AppConfig):
    """Tenant admins managing their own people: invitations (and SSO pre-provisioning), roles, offboarding."""

    name = "people"
