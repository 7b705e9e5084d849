from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from tenants import services
from tenants.management.base import validation_message
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Create a tenant (with the built-in 'chat' and 'coding' sampling profiles)."

    def add_arguments(self, parser):
        parser.add_argument("slug", help="fixed short name used in URLs, e.g. sales")
        parser.add_argument("--name", help="display name (default: the slug, capitalised)")
        parser.add_argument("--inactive", action="store_true", help="create it switched off")
        parser.add_argument("--exist-ok", action="store_true", help="succeed without changes if it exists")

    def handle(self, *args, slug, name, inactive, exist_ok, **options):
        if exist_ok and Tenant.objects.filter(slug=slug).exists():
            self.stdout.write(f"Tenant {slug!r} already exists.")
            return
        try:
            tenant = services.create_tenant(name=name or slug.replace("-", " ").title(), slug=slug, is_active=not inactive)
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from exc
        names = ", ".join(
            f"{p.name}{' (default)' if p.is_default else ''}" for p in tenant.sampling_profiles.order_by("name")
        )
        self.stdout.write(self.style.SUCCESS(f"Created tenant {tenant.slug!r} ({tenant.name}); profiles: {names}."))
