"""Small functions shared by the routers."""

from __future__ import annotations

import msgspec
from fastapi import Response

_encoder = msgspec.json.Encoder()


def json_response(obj: object, status_code: int = 200) -> Response:
    """Encode with msgspec: the response types are msgspec structs, not pydantic models."""
    return Response(_encoder.encode(obj), status_code=status_code, media_type="application/json")
