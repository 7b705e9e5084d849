from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from api import services
from tenants.management.base import get_tenant, validation_message


class Command(BaseCommand):
    help = "Create an API key for a tenant. The key is printed once, on stdout; only its hash is stored."

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("name", help="what the key is for, e.g. 'wiki bot'")
        parser.add_argument("--rpm", type=int, default=None, help="requests per minute (default: no limit)")
        parser.add_argument("--tpm", type=int, default=None, help="tokens per minute (default: no limit)")
        parser.add_argument("--owner", default=None,
                            help="username of the member whose budgets the key's calls count against (default: none, "
                                 "the tenant's key)")

    def handle(self, *args, tenant, name, rpm, tpm, owner, **options):
        tenant_obj = get_tenant(tenant)
        owner_obj = None
        if owner is not None:
            owner_obj = get_user_model().objects.filter(username=owner).first()
            if owner_obj is None:
                raise CommandError(f"No user {owner!r}.")
        try:
            key, plaintext = services.create_api_key(tenant_obj, name, rpm_limit=rpm, tpm_limit=tpm, owner=owner_obj)
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from exc
        self.stderr.write(f"API key {key.name!r} for {tenant_obj.slug} (copy it now; it is not shown again):")
        self.stdout.write(plaintext)
