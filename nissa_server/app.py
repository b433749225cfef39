"""``create_app(settings)``: the FastAPI application, shared by the CLI and the tests."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from nissa_server import __version__, access, openapi
from nissa_server.nul_guard import RefuseNul
from nissa_server.page_headers import DocsHeaders, HeadAsGet
from nissa_server.request_metrics import RequestTimer
from nissa_server.routes import (
    alerts,
    artifacts,
    commands,
    groups,
    histograms,
    ops,
    run_page,
    runs,
    series,
    sweeps,
    web,
    ws,
)
from nissa_server.settings import Settings
from nissa_server.state import Nissa

logger = logging.getLogger(__name__)
DOCS_ASSETS = "/docs-assets"
RETRY_AFTER_S = 5
"""What a 503 (the database away) says in ``Retry-After``."""
DOCS, REDOC = "/docs", "/redoc"

DESCRIPTION = """Stores the events of Esper training runs, streams them live to watchers and routes
operator commands (debug and profile windows) back to the running trainer.

Websockets (not in this document): `/ws/ingest` (a trainer rank streams `events` frames after a
`hello`; the server answers `welcome`, `ack` and `command` frames) and
`/ws/watch?run_id=…&after_seq=N` (also `after_id`, `kind=a,b`, `min_severity`): stored events
after the cursor, then live ones, as `events` frames with a `cursor` to resume from. Frames and
close codes are defined in `leyline.frames`."""


def allowed_methods(routes: list[BaseRoute], scope: Scope) -> list[str]:
    """Every method some route of ``routes`` serves on the request's path (HEAD wherever GET is)."""
    methods: set[str] = set()
    for route in routes:
        match, _ = route.matches({**scope, "method": "OPTIONS"})
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    if "GET" in methods:  # see page_headers.HeadAsGet
        methods.add("HEAD")
    return sorted(methods)


def create_app(settings: Settings) -> FastAPI:
    nissa = Nissa(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await nissa.start()
        try:
            yield
        finally:
            await nissa.stop()

    # /docs and /redoc load Swagger UI and ReDoc from files installed with the server, not from a CDN:
    # they work offline and on an air-gapped machine. The validator badge would call out: off.
    app = FastAPIOffline(title="nissa-server", version=__version__, description=DESCRIPTION, lifespan=lifespan,
                         docs_url=DOCS, redoc_url=REDOC, static_url=DOCS_ASSETS,
                         swagger_ui_parameters={"validatorUrl": None})
    app.state.nissa = nissa
    app.add_middleware(HeadAsGet)
    app.add_middleware(DocsHeaders, pages=[p for p in (DOCS, REDOC, app.swagger_ui_oauth2_redirect_url) if p],
                       assets=DOCS_ASSETS)
    app.add_middleware(RefuseNul)
    app.add_middleware(RequestTimer, histogram=nissa.metrics.http_request)
    # Each router is of one class of access (``access``); the page's own files last (/ui/{file} matches any).
    routers = (runs.router, runs.edits, runs.deletes, series.router, histograms.router, commands.router,
               commands.escalations, artifacts.router, artifacts.uploads, ops.router, ops.reads, ws.ingest_router,
               ws.watch_router, run_page.router, run_page.pages, web.reads, web.router, alerts.router, groups.router,
               sweeps.reads, sweeps.writes)
    served = [*app.router.routes, *(route for router in routers for route in router.routes)]
    app.state.routes = served
    """Every route the app serves, those of its routers one by one (FastAPI keeps an included router whole)."""
    for router in routers:
        app.include_router(router)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # One readable line instead of pydantic's nested error list.
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return JSONResponse({"detail": f"{where}: {first.get('msg', 'invalid request')}"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = exc.headers
        if exc.status_code == 405:  # Starlette names the methods of the first route on the path only
            headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(served, request.scope))}
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)

    async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
        # The database is away (restarting, unreachable, locked): the request may be tried again shortly.
        # The store's health has logged it, once; the reason names the error's type, not the database's address.
        return JSONResponse({"detail": f"the database is unavailable ({type(exc).__name__}): try again shortly"},
                            status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})

    for unavailable in nissa.store.unavailable:
        app.add_exception_handler(unavailable, _unavailable)

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, exc: ClientDisconnect) -> Response:
        # The body stopped short: the client went, or the server cut it for being too slow (and answered
        # 408 itself, see ``protocols``). The client's doing, not the server's: counted as the 408 it is.
        return PlainTextResponse("request body incomplete", status_code=408)

    openapi.install(app, served)
    access.check_routes(served)
    return app
