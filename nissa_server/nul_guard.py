"""Refuse a request whose path or query string holds a NUL character (``%00``): no run id, series name,
alert or command id has one, and PostgreSQL cannot even compare a text with one (it raises), so such a
request gets a 400 saying so before any route reads it. Websockets check their own query (``watch``)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote_to_bytes


def nul_in(scope: dict[str, Any]) -> str | None:
    """Which part of the request holds a NUL (``path`` or ``query string``), or None."""
    if "\x00" in scope.get("path", ""):
        return "path"
    if b"\x00" in unquote_to_bytes(scope.get("query_string", b"")):
        return "query string"
    return None


class RefuseNul:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        where = nul_in(scope) if scope["type"] == "http" else None
        if where is None:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": f"the request's {where} holds a NUL character (%00)"}).encode()
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
