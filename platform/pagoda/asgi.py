"""ASGI entry point: `daphne pagoda.asgi:application` (with platform/ on PYTHONPATH), or `manage.py runserver`.

HTTP goes to Django (static files served here too unless PAGODA_SERVE_STATIC=false); API paths (/v1/,
/tokenize, /detokenize) to Django through a handler of their own without the pages' middleware
(api.asgi: no thread hop before an API call's first token); WebSockets go to
the routes the apps declare (pagoda.routing), behind the origin check (pagoda.ws_origin) and session auth.
The engine starts here, when this module is loaded: daphne does not run ASGI lifespan events, so
a lifespan hook would never fire. It loads in a background thread so the server listens meanwhile.
So does the pin listener (tenants.pin_events): with Redis, prompt changes made on any replica re-pin here.
"""
import os
import signal
import sys
import threading
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
for _path in (_ROOT / "platform", _ROOT):  # the platform's apps, and the engine package `inference`
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pagoda.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()  # sets Django up before anything imports models

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

import engine_runtime  # noqa: E402
from api.asgi import ApiASGIHandler, ApiRouter  # noqa: E402
from observability.arrival import ArrivalStamp  # noqa: E402
from pagoda.header_limits import HeaderLimitMiddleware, raise_server_limits  # noqa: E402
from pagoda.routing import collect_websocket_urlpatterns  # noqa: E402
from pagoda.ws_origin import SameOriginValidator  # noqa: E402


def _http_app():
    pages = django_asgi_app
    if settings.PAGODA_SERVE_STATIC:
        from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

        pages = ASGIStaticFilesHandler(django_asgi_app)
    return ArrivalStamp(ApiRouter(pages, ApiASGIHandler()))


def _stop_engine_with_server() -> None:
    """Under daphne, stop the engine before the reactor shuts down (atexit alone runs too late for
    a non-daemon engine thread, which would keep the process alive), and let SIGINT stop the server."""
    if "twisted.internet.reactor" in sys.modules:
        from twisted.internet import reactor

        reactor.addSystemEventTrigger("before", "shutdown", engine_runtime.shutdown)
        _stop_on_sigint()


def _stop_on_sigint() -> None:
    """A server started in the background by a non-interactive shell (`run.sh &` in a script)
    inherits SIGINT ignored, and Twisted installs its SIGINT handler only over Python's default one:
    SIGINT would then do nothing. Restore the default, so that SIGINT stops the server as SIGTERM does."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


raise_server_limits()  # oversized headers reach HeaderLimitMiddleware (a JSON 431), not a dropped connection
application = HeaderLimitMiddleware(ProtocolTypeRouter(
    {
        "http": _http_app(),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(collect_websocket_urlpatterns()))),
    }
))

if settings.PAGODA_ENGINE == "on":
    engine_runtime.start(background=True)
    _stop_engine_with_server()
if settings.PAGODA_ENGINE != "off":  # a server process (tests import this module with the engine off)
    from tenants import pin_events

    pin_events.start_listener()
