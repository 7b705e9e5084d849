import sys

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

import engine_runtime
from tenants import selectors, services
from tenants.management.base import get_tenant, validation_message
from tenants.models import SystemPrompt


class Command(BaseCommand):
    help = (
        "Save a new version of a tenant's system prompt and activate it; or roll back, deactivate, list. "
        "Running servers re-pin it at once when they share Redis (the change is announced to every "
        "replica), else within PAGODA_PIN_SYNC_SECONDS."
    )

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="tenant slug")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--text", help="the prompt text")
        source.add_argument("--file", help="read the prompt from a file ('-' for stdin)")
        source.add_argument("--rollback", type=int, metavar="VERSION", help="activate an earlier version again")
        source.add_argument("--deactivate", action="store_true", help="leave the tenant without a prompt")
        source.add_argument("--list", action="store_true", help="show the version history")
        parser.add_argument("--note", default="", help="what changed in this version")
        parser.add_argument("--no-activate", action="store_true", help="save the version without activating it")
        parser.add_argument(
            "--no-engine", action="store_true", help="do not load the model to count tokens and check the length"
        )

    def handle(self, *args, tenant, **options):
        tenant_obj = get_tenant(tenant)
        if options["list"]:
            return self._list(tenant_obj)
        if options["deactivate"]:
            previous = services.deactivate_system_prompt(tenant_obj)
            self.stdout.write(f"Deactivated version {previous.version}." if previous else "No prompt was active.")
            return
        started_here = engine_runtime.peek() is None and not options["no_engine"] and settings.PAGODA_ENGINE != "off"
        if started_here:
            self.stderr.write("Loading the model to count tokens…")
            engine_runtime.start()
        try:
            if options["rollback"] is not None:
                prompt = self._rollback(tenant_obj, options["rollback"])
            else:
                text = options["text"] if options["text"] is not None else self._read(options["file"])
                prompt = services.create_system_prompt(
                    tenant_obj, text, note=options["note"], activate=not options["no_activate"]
                )
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from exc
        finally:
            if started_here:
                engine_runtime.shutdown()
        tokens = f"{prompt.num_tokens} tokens" if prompt.num_tokens is not None else "tokens not counted"
        state = "active" if prompt.is_active else "saved, not active"
        self.stdout.write(self.style.SUCCESS(f"{tenant_obj.slug}: version {prompt.version} ({tokens}), {state}."))

    def _read(self, path: str) -> str:
        if path == "-":
            return sys.stdin.read()
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc

    def _rollback(self, tenant, version: int) -> SystemPrompt:
        try:
            return services.rollback_system_prompt(tenant, version)
        except SystemPrompt.DoesNotExist:
            raise CommandError(f"{tenant.slug} has no version {version}") from None

    def _list(self, tenant) -> None:
        for prompt in selectors.system_prompt_history(tenant):
            mark = "*" if prompt.is_active else " "
            first_line = prompt.text.strip().splitlines()[0][:60] if prompt.text.strip() else ""
            self.stdout.write(f"{mark} v{prompt.version:<4} {prompt.num_tokens or '-':>6} tok  {first_line}")
