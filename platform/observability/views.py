"""GET /health (public, for load balancers and probes) and GET /metrics (Prometheus, protected)."""
import asyncio

from django.http import HttpResponse, HttpResponseForbidden, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from observability import access, metrics
from observability.health import engine_health


@never_cache
@require_safe
async def health(request):
    """200 {"status": "ok", ...} when the engine serves; 503 {"status": "unavailable", "reason"} otherwise."""
    healthy, body = engine_health()
    return JsonResponse(body, status=200 if healthy else 503)


@never_cache
@require_safe
async def metrics_view(request):
    """The metrics in Prometheus text format (OpenMetrics if asked); 403 unless allowed (see access)."""
    if not access.metrics_allowed(request):
        return HttpResponseForbidden("metrics: address not allowed and no valid token\n",
                                     content_type="text/plain")
    # engine.stats() waits for the engine lock (up to one step): off the event loop.
    body, content_type = await asyncio.to_thread(metrics.exposition, request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)
