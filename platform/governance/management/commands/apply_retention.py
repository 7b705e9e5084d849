"""manage.py apply_retention [--tenant SLUG] [--dry-run]: delete conversations older than their
tenant's retention period (run daily by deploy/systemd/pagoda-retention.timer); each run is audited."""
from django.core.management.base import BaseCommand, CommandError

from governance.retention import apply_retention
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Delete the conversations whose last activity is older than their tenant's retention period."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="Only this tenant (its slug).")
        parser.add_argument("--dry-run", action="store_true", help="Count what would go; delete nothing.")

    def handle(self, *args, tenant: str | None, dry_run: bool, **options):
        if tenant is not None and not Tenant.objects.filter(slug=tenant).exists():
            raise CommandError(f"No tenant with slug {tenant!r}.")
        results = apply_retention(tenant_slug=tenant, dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        for r in results:
            self.stdout.write(f"{r.tenant_slug}: {verb} {r.num_conversations} conversation(s) older than "
                              f"{r.retention_days} days (before {r.cutoff:%Y-%m-%d %H:%M %Z})")
        if not results:
            self.stdout.write("No tenant has a retention period.")
