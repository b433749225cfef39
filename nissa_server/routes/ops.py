"""``GET /`` (where to start), ``GET /healthz``, ``GET /auth`` and ``GET /metrics``."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from nissa_server import __version__
from nissa_server.access import Access, guarded
from nissa_server.auth import bearer_ok
from nissa_server.deps import NissaDep
from nissa_server.openapi import EXAMPLES, error, ok, ref
from nissa_server.routes.common import json_response
from nissa_server.schemas import Degraded, Health
from nissa_server.store import queries

router = APIRouter(tags=["operations"])
"""Open to anyone (``access.OPEN_ROUTES``)."""
reads = guarded(Access.READ, tags=["operations"])

# What ``GET /`` points to: enough for someone who typed the server's address into a browser.
INDEX = {"service": "nissa-server", "version": __version__, "ui": "/ui", "docs": "/docs", "openapi": "/openapi.json",
         "runs": "/runs", "alerts": "/alerts", "health": "/healthz", "metrics": "/metrics"}
_INDEX_SCHEMA = {"type": "object", "properties": {key: {"type": "string"} for key in INDEX},
                 "required": list(INDEX)}


@router.get("/", summary="Where to start: links to the API's documentation and main resources",
            response_class=Response,
            responses={200: ok(_INDEX_SCHEMA, INDEX),
                       303: {"description": "A browser (HTML asked for before JSON): to the web page, /ui"}})
async def index(request: Request) -> Response:
    # A browser (it asks for HTML before JSON) goes to the web page; an API client gets the links.
    if _wants_html(request.headers.get("accept", "")):
        return RedirectResponse("/ui", status_code=303)
    return json_response(INDEX)


def _wants_html(accept: str) -> bool:
    """Whether an Accept header asks for HTML before JSON (a browser's ``text/html,…,*/*;q=0.8``)."""
    ranks: dict[str, float] = {}
    for part in accept.split(","):
        media, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        ranks[media.strip().lower()] = max(q, ranks.get(media.strip().lower(), 0.0))
    html = ranks.get("text/html", 0.0)
    return html > 0 and html > ranks.get("application/json", 0.0)


@router.get("/healthz", summary="Liveness, and what does not work now (never needs a token; with --read-auth, runs, "
            "watchers and the reasons only with it)",
            response_class=Response,
            responses={200: ok(ref(Health), EXAMPLES["health"])})
async def healthz(request: Request, n: NissaDep) -> Response:
    if n.settings.read_auth and not bearer_ok(request.headers.get("authorization"), n.settings.token):
        # What is stored is for readers: without the token, only that the server is up (and whether it is whole).
        return json_response(Health(status="degraded" if n.health.degraded else "ok", version=__version__,
                                    schema_version=n.store.schema_version))
    try:
        runs: int | None = await n.store.read(queries.count_runs)
    except n.store.unavailable:  # the store's health says so
        runs = None
    degraded = {part: Degraded(since=t.since, reason=t.reason, failures=t.failures)
                for part, t in n.health.degraded.items()}
    return json_response(Health(status="degraded" if degraded else "ok", version=__version__,
                                schema_version=n.store.schema_version, runs=runs, watchers=len(n.fanout.watchers),
                                degraded=degraded))


_ACCESS_SCHEMA = {"type": "object", "required": ["write", "read"], "properties": {
    "write": {"type": "boolean", "description": "escalations, uploads and deletes will be taken"},
    "read": {"type": "boolean", "description": "runs, events, artifacts and metrics will be served"}}}


@router.get("/auth", summary="What the request's bearer token (or none) may do here: write, read (never needs a "
            "token; a client checks its token with it before the operator needs it)",
            response_class=Response, responses={200: ok(_ACCESS_SCHEMA, {"write": False, "read": True})})
async def access(request: Request, n: NissaDep) -> Response:
    settings = n.settings
    write = bearer_ok(request.headers.get("authorization"), settings.token)
    return json_response({"write": write, "read": write or not settings.read_auth})


@reads.get("/metrics", summary="Prometheus metrics",
            response_class=Response,
            responses={200: {"description": "Prometheus text format",
                             "content": {"text/plain": {"schema": {"type": "string"},
                                                        "example": "nissa_events_ingested_total 1234.0\n"}}},
                       401: error("Reads need the bearer token (server started with --read-auth)",
                                  "missing or wrong bearer token")})
async def metrics(n: NissaDep) -> Response:
    registry = n.metrics.registry
    # The commands collector reads the database: off the event loop.
    body = await asyncio.to_thread(generate_latest, registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
