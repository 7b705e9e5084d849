from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from tenants import services
from tenants.models import Membership, Tenant

DEMO_SLUG = "demo"
DEMO_PROMPT = (
    "You are Pagoda, the company's internal assistant. Answer clearly and concisely. "
    "If you are not sure, say so. Reply in the language of the question (Korean or English)."
)


class Command(BaseCommand):
    help = (
        "First-run setup, idempotent: a superuser (PAGODA_ADMIN_USER / PAGODA_ADMIN_PASSWORD, default "
        "admin/admin) if no superuser exists, and a demo tenant with a system prompt if no tenant exists. "
        "Run `migrate` first; this applies nothing."
    )

    def handle(self, *args, **options):
        with transaction.atomic():
            self._superuser()
            self._demo_tenant()

    def _superuser(self) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            self.stdout.write("A superuser exists; not creating one.")
            return
        username, password = settings.PAGODA_ADMIN_USER, settings.PAGODA_ADMIN_PASSWORD
        User.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(self.style.SUCCESS(f"Created superuser {username!r} with password {password!r}."))
        if password == "admin":
            self.stdout.write(
                self.style.WARNING(
                    "WARNING: this is the default password. Change it now: "
                    f"`.venv/bin/python manage.py changepassword {username}`"
                )
            )

    def _demo_tenant(self) -> None:
        if Tenant.objects.exists():
            self.stdout.write("Tenants exist; not creating the demo tenant.")
            return
        tenant = services.create_tenant(name="Demo", slug=DEMO_SLUG)
        # Counted and pinned when the server's engine starts (it pins every active prompt).
        services.create_system_prompt(tenant, DEMO_PROMPT, note="created by bootstrap")
        admin = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
        if admin is not None:
            services.add_member(tenant, admin, role=Membership.Role.ADMIN)
        self.stdout.write(self.style.SUCCESS(f"Created the demo tenant {DEMO_SLUG!r} with a system prompt."))
