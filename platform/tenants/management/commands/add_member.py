from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from tenants import services
from tenants.management.base import get_tenant, validation_message
from tenants.models import Membership


class Command(BaseCommand):
    help = "Add a user to a tenant (or change their role there)."

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("username")
        parser.add_argument("--role", choices=[r.value for r in Membership.Role], default=Membership.Role.MEMBER)
        parser.add_argument("--create", action="store_true", help="create the user if missing")
        parser.add_argument("--password", help="password for a user created with --create (else: cannot log in)")
        parser.add_argument("--email", default="")

    def handle(self, *args, tenant, username, role, create, password, email, **options):
        tenant_obj = get_tenant(tenant)
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create:
                raise CommandError(f"no user {username!r} (pass --create to make one)")
            user = User.objects.create_user(username=username, email=email, password=password)
            self.stdout.write(f"Created user {username!r}{'' if password else ' without a usable password'}.")
        try:
            membership = services.add_member(tenant_obj, user, role=role)
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from exc
        self.stdout.write(self.style.SUCCESS(f"{username} is now {membership.get_role_display()} of {tenant_obj.slug}."))
