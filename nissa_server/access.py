"""Who may call what. Every router declares one class of access for all its routes (``guarded``); the few routes
anyone may call are listed by path in ``OPEN_ROUTES``; ``check_routes`` refuses an app with a route that is
neither, or both. There is one token (``--token``): it opens everything; ``--read-auth`` makes reads need it too.

- ``open``: never needs the token (the index, health, ``/auth``, the page's own files, the API's documentation).
- ``read``: stored runs, events, series, artifacts, metrics and ``/ws/watch``: the token only with ``--read-auth``.
- ``write``: ingest, uploads, ``POST /escalate``, ``PATCH /runs/{run_id}``: the token, where one is set.
- ``destructive``: ``DELETE``: the token; a server without one refuses (403) unless it was started ``--open``.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable

from fastapi import APIRouter, Depends, HTTPException
from starlette.exceptions import WebSocketException
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.websockets import WebSocket

from leyline.frames import CLOSE_UNAUTHORIZED
from nissa_server.auth import BROWSER_PROTOCOL, bearer_from_protocols, bearer_ok
from nissa_server.deps import NissaDep
from nissa_server.settings import Settings
from nissa_server.state import Nissa


class Access(enum.StrEnum):
    OPEN = "open"
    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"


OPEN_ROUTES = frozenset({
    "/", "/healthz", "/auth",  # where to start, liveness, what a token may do
    "/ui", "/ui/", "/favicon.ico", "/ui/{path:path}", "/ui/steer.json",  # the page and its files (no data)
    "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/docs-assets",  # the API's documentation
})
"""The paths anyone may call, listed once: every other route is in a guarded router."""

WRONG_TOKEN = "missing or wrong bearer token"
NO_DELETES = ("this server has no token, so it does not delete: start it with --token (or NISSA_TOKEN), or with "
              "--open to let every local process delete")


def refusal(access: Access, authorization: str | None, settings: Settings) -> tuple[int, str] | None:
    """(HTTP status, reason) where a request of ``access`` with this ``Authorization`` header is refused."""
    if access is Access.OPEN or (access is Access.READ and not settings.read_auth):
        return None
    if access is Access.DESTRUCTIVE and settings.token is None and not settings.open:
        return 403, NO_DELETES
    return None if bearer_ok(authorization, settings.token) else (401, WRONG_TOKEN)


def _guard(access: Access) -> Callable[[HTTPConnection, Nissa], Awaitable[None]]:
    """The dependency of a router of ``access``: a 401 (403) with the reason, or on a websocket its close code."""
    async def guard(request_or_ws: HTTPConnection, n: NissaDep) -> None:
        if isinstance(request_or_ws, WebSocket):  # a browser sends its token as a subprotocol
            offered = list(request_or_ws.scope.get("subprotocols") or ())
            header = request_or_ws.headers.get("authorization") or bearer_from_protocols(offered)
            refused = refusal(access, header, n.settings)
            if refused is not None:  # said as the websocket's close code, once it is open
                if access is Access.WRITE:
                    n.metrics.rejected.labels("unauthorized").inc()
                await request_or_ws.accept(subprotocol=BROWSER_PROTOCOL if BROWSER_PROTOCOL in offered else None)
                raise WebSocketException(CLOSE_UNAUTHORIZED, refused[1])
            return
        refused = refusal(access, request_or_ws.headers.get("authorization"), n.settings)
        if refused is not None:
            status, reason = refused
            raise HTTPException(status, reason, headers={"WWW-Authenticate": "Bearer"} if status == 401 else None)

    guard.__name__ = f"require_{access.value}"
    return guard


GUARDS: dict[Access, Callable[[HTTPConnection, Nissa], Awaitable[None]]] = {
    access: _guard(access) for access in Access if access is not Access.OPEN}


def guarded(access: Access, tags: list[str | enum.Enum] | None = None) -> APIRouter:
    """A router whose every route needs ``access``."""
    return APIRouter(tags=tags, dependencies=[Depends(GUARDS[access])])


def access_of(route: BaseRoute) -> Access:
    """The class a route was declared with: its router's guard, or open (by ``OPEN_ROUTES``)."""
    found = [access for access, guard in GUARDS.items()
             if any(d.dependency is guard for d in getattr(route, "dependencies", ()))]
    if len(found) > 1:
        raise RuntimeError(f"route {_path(route)} is guarded twice ({', '.join(found)})")
    return found[0] if found else Access.OPEN


def _path(route: BaseRoute) -> str:
    return route.path if isinstance(route, Route | WebSocketRoute | Mount) else repr(route)


def check_routes(routes: Iterable[BaseRoute]) -> None:
    """Every route declares its class: guarded by its router, or listed in ``OPEN_ROUTES`` (never both)."""
    for route in routes:
        access, path = access_of(route), _path(route)
        if (access is Access.OPEN) != (path in OPEN_ROUTES):
            listed = "listed" if path in OPEN_ROUTES else "not listed"
            raise RuntimeError(f"route {path}: declared {access.value}, and {listed} in OPEN_ROUTES: put it in a "
                               f"guarded router, or list it as open")
