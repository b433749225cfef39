"""Bearer-token checks shared by HTTP routes (``nissa_server.deps``) and websockets."""

from __future__ import annotations

import base64
import binascii
import hmac


def bearer_ok(header: str | None, token: str | None) -> bool:
    """True if no token is configured, or ``header`` is ``Bearer <token>`` (compared in constant time)."""
    if token is None:
        return True
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


BROWSER_PROTOCOL = "nissa"
"""The websocket subprotocol a browser offers (a browser cannot set an Authorization header on a
websocket): with it, ``nissa.bearer.<token in unpadded base64url>`` carries the token."""
_BEARER_PROTOCOL = "nissa.bearer."


def bearer_from_protocols(offered: list[str]) -> str | None:
    """``Bearer <token>`` from the subprotocols a browser offered (None if it offered none)."""
    for protocol in offered:
        if protocol.startswith(_BEARER_PROTOCOL):
            encoded = protocol[len(_BEARER_PROTOCOL):]
            try:
                return "Bearer " + base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
            except (binascii.Error, UnicodeDecodeError):
                return None
    return None
