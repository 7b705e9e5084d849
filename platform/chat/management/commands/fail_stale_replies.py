from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from chat import services


class Command(BaseCommand):
    help = (
        "Store as failed every chat reply pending for longer than --older-than seconds: its save failed or "
        "its process died, and nothing will save it now. The page already shows such replies failed, and a "
        "conversation's next turn stores it for that conversation; this does it for all (e.g. from cron)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than", type=float, dest="older_than_s",
                            default=settings.PAGODA_CHAT_STALE_REPLY_SECONDS,
                            help="seconds (default PAGODA_CHAT_STALE_REPLY_SECONDS, %(default)s)")

    def handle(self, *args, older_than_s, **options):
        if older_than_s < 0:
            raise CommandError("--older-than must be 0 or more seconds")
        num = services.fail_stale_replies(older_than_s)
        self.stdout.write(f"{num} stale {'reply' if num == 1 else 'replies'} marked failed")
