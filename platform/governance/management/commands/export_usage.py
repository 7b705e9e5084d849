"""manage.py export_usage --tenant SLUG --month YYYY-MM [--output FILE]: a month of the ledger as CSV."""
import sys

from django.core.management.base import BaseCommand, CommandError

from governance import usage_csv
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Write one tenant's usage ledger for one month (TIME_ZONE) as CSV, to a file or stdout."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="The tenant's slug.")
        parser.add_argument("--month", required=True, help="YYYY-MM")
        parser.add_argument("--output", help="A file to write (default: standard output).")

    def handle(self, *args, tenant: str, month: str, output: str | None, **options):
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"No tenant with slug {tenant!r}.")
        try:
            if output:
                with open(output, "w", newline="", encoding="utf-8") as out:
                    count = usage_csv.write_month(out, found.pk, month)
            else:
                count = usage_csv.write_month(sys.stdout, found.pk, month)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror}") from None
        if output:
            self.stderr.write(f"Wrote {count} usage records of {tenant} in {month} to {output}.")
