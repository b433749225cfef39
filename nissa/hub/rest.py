"""The server's HTTP side as a trainer uses it: URLs, artifact names, a reachability check, artifacts.

No torch here: ``esper-train upload`` uses it, and so does the profile handler of a live run.
"""

from __future__ import annotations

import os
import platform
import re
import time
import urllib.parse
from collections.abc import Callable

import httpx

from leyline.frames import STREAM_SECRET_HEADER
from nissa.hub.config import INGEST_PATH

PROBE_TIMEOUT_S = 3.0
"""How long one reachability check waits to connect, and then for an answer."""


class ServerUnavailable(Exception):
    """No nissa-server answers at the URL (refused, unreachable, silent, or another service)."""


def http_url(server: str, path: str) -> str:
    """``{server}{path}`` over http(s), whatever scheme ``server`` was given in (``ws://…/ws/ingest`` too);
    of a comma-separated list of servers, the first (artifacts go there)."""
    parts = urllib.parse.urlsplit(server.split(",")[0].strip())
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    base = parts.path.rstrip("/")
    if base.endswith(INGEST_PATH):
        base = base[: -len(INGEST_PATH)]
    return urllib.parse.urlunsplit((scheme, parts.netloc, base + path, "", ""))


def artifacts_url(server: str, run_id: str) -> str:
    """``{server}/runs/{run_id}/artifacts`` over http(s): the run's list of artifacts."""
    return http_url(server, f"/runs/{urllib.parse.quote(run_id, safe='')}/artifacts")


def artifact_url(server: str, run_id: str, name: str) -> str:
    """``{server}/runs/{run_id}/artifacts/{name}`` over http(s)."""
    return f"{artifacts_url(server, run_id)}/{urllib.parse.quote(name, safe='')}"


def artifact_name(window: str, host: str | None = None, pid: int | None = None, rank: int | None = None) -> str:
    """``profile-<window>-[rank<N>-]<host>-<pid>.pt.trace.json``: unique across ranks, safe as a server file
    name; a window's traces (one per rank in a run of several) share the ``profile-<window>-`` prefix.

    ``host`` and ``pid`` default to this process's; an upload after the run passes the run's own (from
    its ``run_started``), so a trace gets the name the live run would have given it.
    """
    host = re.sub(r"[^A-Za-z0-9_-]+", "-", (platform.node() if host is None else host) or "host")[:40]
    who = "" if rank is None else f"rank{rank}-"
    return f"profile-{window}-{who}{host}-{os.getpid() if pid is None else pid}.pt.trace.json"[:128]


def auth_headers(token: str | None, secret: str | None = None) -> dict[str, str]:
    """The bearer token, and the run's stream secret (which an artifact upload needs), when given."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if secret:
        headers[STREAM_SECRET_HEADER] = secret
    return headers


def check_server(server: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """``GET /healthz`` once; ServerUnavailable says in a few words why nothing usable answered."""
    try:
        response = httpx.get(http_url(server, "/healthz"), timeout=timeout_s)
    except httpx.ConnectError as err:
        raise ServerUnavailable(_reason(err)) from None
    except httpx.TimeoutException:
        raise ServerUnavailable(f"no answer within {timeout_s:g} s") from None
    except httpx.HTTPError as err:
        raise ServerUnavailable(_reason(err)) from None
    try:
        body = response.json() if response.status_code == 200 else None
    except ValueError:
        body = None
    if not isinstance(body, dict) or body.get("status") != "ok":
        raise ServerUnavailable(f"GET /healthz answered HTTP {response.status_code}, not as nissa-server does "
                                "(another service on that port?)")


def wait_for_server(server: str, wait_s: float, on_retry: Callable[[str], None] | None = None,
                    every_s: float = 1.0) -> None:
    """``check_server`` until it passes or ``wait_s`` seconds are over (0: one try). ``on_retry`` hears
    why the first try failed, once."""
    deadline = time.monotonic() + wait_s
    told = False
    while True:
        try:
            check_server(server)
            return
        except ServerUnavailable as err:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise
            if on_retry is not None and not told:
                on_retry(str(err))
                told = True
        time.sleep(min(every_s, remaining))


def _reason(err: httpx.HTTPError) -> str:
    cause: BaseException = err
    while (under := cause.__cause__ or cause.__context__) is not None:  # the OSError under httpx's wrappers
        cause = under
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror.lower()
    return str(err) or type(err).__name__
