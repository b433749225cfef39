"""The web page at ``/ui``: static files shipped in the package (``nissa_server/web``), uPlot vendored
beside them. The page reads the API like any client; with ``--read-auth`` it asks for the token, and the
files themselves (no data in them) are served to anyone."""

from __future__ import annotations

import functools
import importlib.resources
import json
import pathlib

from fastapi import APIRouter, HTTPException, Response
from fastapi.responses import RedirectResponse

from leyline import charts
from nissa_server.access import Access, guarded
from nissa_server.openapi import Responses, error

router = APIRouter(tags=["web page"])
"""Open to anyone (``access.OPEN_ROUTES``): the page and its files."""
reads = guarded(Access.READ, tags=["web page"])
_READ_REFUSED: Responses = {401: error("Reads need the bearer token (server started with --read-auth)",
                            "missing or wrong bearer token")}
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".md": "text/plain; charset=utf-8", ".svg": "image/svg+xml"}
# The page loads nothing from anywhere else: scripts, styles and connections to this server only.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


@functools.cache
def _files() -> dict[str, bytes]:
    """Every file of the page by its path under ``/ui/`` (read once: they are small)."""
    root = importlib.resources.files("nissa_server") / "web"
    out: dict[str, bytes] = {}

    def walk(node, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif pathlib.PurePosixPath(child.name).suffix in TYPES:
                out[prefix + child.name] = child.read_bytes()
            elif child.name == "LICENSE":
                out[prefix + child.name] = child.read_bytes()

    walk(root, "")
    return out


def _serve(path: str) -> Response:
    body = _files().get(path)
    if body is None:
        raise HTTPException(404, f"no file {path!r} in the web page")
    media = TYPES.get(pathlib.PurePosixPath(path).suffix, "text/plain; charset=utf-8")
    return Response(body, media_type=media, headers={"Content-Security-Policy": CSP,
                                                     "X-Content-Type-Options": "nosniff",
                                                     "Cache-Control": "no-cache"})


@router.get("/ui", summary="The web page: runs, charts with markers, live updates, overlays",
            response_class=Response, responses={200: {"description": "The page", "content": {"text/html": {
                "schema": {"type": "string", "format": "html"}, "example": "<!doctype html>\n<html lang=\"en\">…"}}}})
async def page() -> Response:
    return _serve("index.html")


@router.get("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:
    # Browsers ask for it at the root whatever the page says: the page's own icon (an SVG) there too.
    return _serve("favicon.svg")


@router.get("/ui/", include_in_schema=False)
async def page_slash() -> RedirectResponse:
    return RedirectResponse("/ui", status_code=308)


_CHART_EXAMPLE = {"charts": [{"title": "accuracy", "names": ["epoch_completed.accuracy"], "higher_is_better": True,
                              "group": None}], "own_charts": 12, "hidden_metrics": ["system."],
                  "hidden_params": ["run_name"], "lower_is_better_words": ["loss"]}


@reads.get("/ui/charts.json", summary="What to chart, for the page: the default charts (titles, series patterns in "
            "which * matches any characters, groups), how many of a loop's own metrics, the config keys that never "
            "tell runs apart; the console reads the same definition",
            response_class=Response,
            responses={200: {"description": "The definition", "content": {"application/json": {
                "schema": {"type": "object"}, "example": _CHART_EXAMPLE}}}, **_READ_REFUSED})
async def chart_definitions() -> Response:
    # One definition (leyline.charts): the page and the console chart the same things under the same titles.
    return Response(json.dumps(charts.definition()), media_type="application/json",
                    headers={"Cache-Control": "no-cache"})


@router.get("/ui/{path:path}", summary="A file of the web page (its script, styles, the vendored uPlot)",
            response_class=Response, responses={200: {"description": "The file", "content": {"application/javascript": {
                "schema": {"type": "string", "format": "binary"}, "example": "\"use strict\";…"}}},
                       404: {"description": "No such file"}})
async def asset(path: str) -> Response:
    return _serve(path)
