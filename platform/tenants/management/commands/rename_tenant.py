"""manage.py rename_tenant OLD NEW: fix a slug typed wrong at creation (tenants.services.rename_tenant)."""
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from tenants import services
from tenants.management.base import get_tenant, validation_message


class Command(BaseCommand):
    help = ("Change a tenant's slug. Its console URLs, engine pin and prefix-cache key move to the new slug at "
            "once (the old URLs answer 404); memberships, conversations, keys and budgets stay.")

    def add_arguments(self, parser):
        parser.add_argument("old", help="the slug now")
        parser.add_argument("new", help="the slug it should have")

    def handle(self, *args, old, new, **options):
        tenant = get_tenant(old)
        try:
            services.rename_tenant(tenant, new)
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from exc
        self.stdout.write(self.style.SUCCESS(f"Renamed {old!r} to {new!r}: the console is now /console/{new}/."))
        self.stdout.write("API keys made before keep working; their text still ends in "
                          f"'.{old}', so a load balancer routes them as before (issue new keys to route them with "
                          "the tenant's chat).")
