"""The server's sweep routes as the ``nissa sweep`` commands and the agent call them."""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
import msgspec

from leyline.sweeps import Lease, LeaseGranted, SweepCreated, SweepInfo, SweepSpec
from nissa.api import ApiError, ServerClient, refusal

T = TypeVar("T")


class SweepError(ApiError):
    """The server refused a sweep request (``status``: its HTTP status), or did not answer (``status`` None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SweepClient(ServerClient):
    """``/sweeps`` of one server (``token``: default ``$NISSA_TOKEN``, when it wants one)."""

    _who = "nissa sweep"

    def _call(self, method: str, path: str, into: type[T], body: Any = None) -> T:
        try:
            reply = self._http.request(method, path, content=None if body is None else msgspec.json.encode(body),
                                       headers={"Content-Type": "application/json"} if body is not None else None)
        except httpx.HTTPError as err:
            raise SweepError(f"no answer from {self.server}: {err}") from None
        if reply.status_code >= 400:
            raise SweepError(f"{method} {path}: {reply.status_code} {refusal(reply)}", reply.status_code)
        try:
            return msgspec.json.decode(reply.content, type=into)
        except msgspec.ValidationError as err:
            raise SweepError(f"{method} {path}: unexpected answer ({err})") from None

    def create(self, spec: SweepSpec) -> SweepCreated:
        return self._call("POST", "/sweeps", SweepCreated, spec)

    def get(self, sweep_id: str) -> SweepInfo:
        return self._call("GET", f"/sweeps/{_quote(sweep_id)}", SweepInfo)

    def list(self) -> list[SweepInfo]:
        return self._call("GET", "/sweeps", list[SweepInfo])

    def stop(self, sweep_id: str) -> SweepInfo:
        return self._call("POST", f"/sweeps/{_quote(sweep_id)}/stop", SweepInfo)

    def lease(self, sweep_id: str, lease: Lease) -> LeaseGranted:
        return self._call("POST", f"/sweeps/{_quote(sweep_id)}/lease", LeaseGranted, lease)


def _quote(text: str) -> str:
    import urllib.parse

    return urllib.parse.quote(text, safe="")
