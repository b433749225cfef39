"""HTTP request latency per route: a plain ASGI middleware (no request objects built, websockets untouched).

Labelled by the route's template (``/runs/{run_id}/events``), never by the path asked for, so a run id
or a made-up path never becomes a label; requests no route matched share ``unmatched``.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import Histogram

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"


def route_template(scope: dict[str, Any]) -> str:
    """The template of the route that served ``scope`` (the router notes it in the scope), or ``unmatched``."""
    route = scope.get("route")
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    return template if isinstance(template, str) and template else UNMATCHED


class RequestTimer:
    def __init__(self, app: Any, histogram: Histogram) -> None:
        self.app, self.histogram = app, histogram

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500  # what the client gets if the app raises before it answers

        async def noting_status(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        finally:
            method = scope.get("method", "")
            self.histogram.labels(route_template(scope), method if method in _METHODS else "other",
                                  f"{status // 100}xx").observe(time.perf_counter() - began)
