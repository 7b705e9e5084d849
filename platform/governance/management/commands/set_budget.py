"""manage.py set_budget --tenant SLUG --period day|month --tokens N [--source all|chat|api]
[--each-member | --user NAME] [--remove]: set or remove a token budget (audited)."""
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from governance import services
from governance.models import Budget
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Set (or --remove) a tenant's token budget: the whole tenant, each employee, or one employee."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--period", required=True, choices=Budget.Period.values)
        parser.add_argument("--tokens", type=int, help="Prompt plus output tokens per period.")
        parser.add_argument("--source", default=Budget.Source.ALL, choices=Budget.Source.values)
        who = parser.add_mutually_exclusive_group()
        who.add_argument("--each-member", action="store_true", help="Every employee of the tenant, each on their own.")
        who.add_argument("--user", help="One employee (username).")
        parser.add_argument("--remove", action="store_true")

    def handle(self, *args, **o):
        tenant = Tenant.objects.filter(slug=o["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant with slug {o['tenant']!r}.")
        user = None
        if o["user"]:
            user = get_user_model().objects.filter(username=o["user"]).first()
            if user is None:
                raise CommandError(f"No user {o['user']!r}.")
        scope = Budget.Scope.USER if user else (Budget.Scope.MEMBER if o["each_member"] else Budget.Scope.TENANT)
        if o["remove"]:
            budget = Budget.objects.filter(tenant=tenant, scope=scope, user=user, period=o["period"],
                                           source=o["source"]).first()
            if budget is None:
                raise CommandError("No such budget.")
            services.delete_budget(budget)
            self.stdout.write(f"Removed: {budget}")
            return
        if o["tokens"] is None or o["tokens"] < 1:
            raise CommandError("--tokens must be a positive number (or pass --remove).")
        try:
            budget = services.set_budget(tenant, scope=scope, user=user, period=o["period"], source=o["source"],
                                         max_tokens=o["tokens"])
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"Set: {budget}")
