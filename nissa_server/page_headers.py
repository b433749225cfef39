"""Two plain ASGI middlewares: HEAD answered wherever GET is, and the documentation pages' security headers.

FastAPI's routes take the methods they are declared with and nothing more, so a HEAD of any GET route
would be 405: ``HeadAsGet`` routes it as the GET it asks about, and uvicorn sends the head without the
body (it knows the request was HEAD). ``/docs`` and ``/redoc`` are pages FastAPI writes, with an inline
script of its own: ``DocsHeaders`` gives them a Content-Security-Policy that allows that script by its
hash and nothing else inline, and forbids framing, as the web page's (``routes.web``) does.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from typing import Any

from starlette.datastructures import MutableHeaders

_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)
_CSP = ("default-src 'none'; script-src 'self'{hashes}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "font-src 'self' data:; connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'")


class HeadAsGet:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "HEAD":
            scope = {**scope, "method": "GET"}  # a copy: the server's own scope still says HEAD
        await self.app(scope, receive, send)


def docs_csp(html: bytes) -> str:
    """The policy of a documentation page: its own inline scripts, by hash; files from this server."""
    hashes = "".join(f" 'sha256-{base64.b64encode(hashlib.sha256(script).digest()).decode()}'"
                     for script in _INLINE_SCRIPT.findall(html))
    return _CSP.format(hashes=hashes)


class DocsHeaders:
    """Security headers on ``pages`` (HTML, read whole to hash their scripts) and on the files under
    ``assets`` (passed through as they stream)."""

    def __init__(self, app: Any, pages: Iterable[str], assets: str) -> None:
        self.app, self.pages, self.assets = app, frozenset(pages), assets.rstrip("/") + "/"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif path in self.pages:
            await self.app(scope, receive, _PageSend(send))
        elif path.startswith(self.assets):
            await self.app(scope, receive, _with_headers(send))
        else:
            await self.app(scope, receive, send)


def _protect(message: dict[str, Any], csp: str) -> None:
    headers = MutableHeaders(scope=message)
    headers["Content-Security-Policy"] = csp
    headers["X-Frame-Options"] = "DENY"
    headers["X-Content-Type-Options"] = "nosniff"


def _with_headers(send: Any) -> Any:
    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            _protect(message, _CSP.format(hashes=""))
        await send(message)

    return sending


class _PageSend:
    """Holds a page's response start until its body is whole, then sends both with the headers."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.start: dict[str, Any] | None = None
        self.body = bytearray()

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.start = message
            return
        if message["type"] != "http.response.body" or self.start is None:
            await self.send(message)
            return
        self.body += message.get("body", b"")
        if message.get("more_body", False):
            return
        _protect(self.start, docs_csp(bytes(self.body)))
        await self.send(self.start)
        await self.send({"type": "http.response.body", "body": bytes(self.body)})
