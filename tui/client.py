"""The console's view of nissa-server: REST through httpx, the live stream through websockets.

``WatchStream`` yields event batches and connection-state changes; after any disconnect it
reconnects with capped exponential backoff and resumes after the server cursor of the last
batch it delivered, so a watcher sees every event exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import httpx
import msgspec
import websockets
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from leyline import CommandRecord, DecodeError, EscalateRequest, Event, decode_events, decode_frame
from leyline.busy import BUSY_RETRIES, retry_after_s
from leyline.frames import CLOSE_UNAUTHORIZED, MAX_FRAME_BYTES, EventBatch
from leyline.groups import BandsReply, ConfigDiff, GroupsReply
from leyline.runs import RunDetail, RunSummary
from leyline.series import Marker
from leyline.sweep_view import SweepView
from leyline.sweeps import SweepInfo
from tui.client_histograms import HistogramReads

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientConfig:
    """Where the server is and how patiently to talk to it."""

    server: str
    """Base URL, e.g. ``http://127.0.0.1:8765``."""
    token: str | None = None
    """Bearer token sent with every request (the server needs it for escalations)."""
    timeout_s: float = 10.0
    """Timeout of one REST request and of opening the websocket."""
    backoff_initial_s: float = 0.25
    """First reconnect delay; doubles per failed attempt."""
    backoff_max_s: float = 5.0
    """Cap on the reconnect delay."""

    def __post_init__(self) -> None:
        parts = urlsplit(self.server)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"--server must be an http(s) URL like http://127.0.0.1:8765, got {self.server!r}")
        if not 0 < self.backoff_initial_s <= self.backoff_max_s:
            raise ValueError("need 0 < backoff_initial_s <= backoff_max_s")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")

    @property
    def base(self) -> str:
        return self.server.rstrip("/")

    @property
    def ws_base(self) -> str:
        parts = urlsplit(self.base)
        scheme = "wss" if parts.scheme == "https" else "ws"
        return urlunsplit((scheme, parts.netloc, parts.path, "", ""))

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


SEND_TRIES = 3
"""Times a command is sent when no answer comes (the same ``Idempotency-Key`` each time)."""


class ApiError(Exception):
    """The server said no (``status`` is its HTTP code) or could not be reached (``status`` 0)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}" if status else reason)
        self.status = status
        self.reason = reason


class RunsPage(msgspec.Struct):
    """A page of ``GET /runs`` and how many runs match in all (``X-Total-Count``)."""

    runs: list[RunSummary]
    total: int


_runs_decoder = msgspec.json.Decoder(list[RunSummary])
_run_decoder = msgspec.json.Decoder(RunDetail)
_command_decoder = msgspec.json.Decoder(CommandRecord)
_sweeps_decoder = msgspec.json.Decoder(list[SweepInfo])
_sweep_view_decoder = msgspec.json.Decoder(SweepView)
_markers_decoder = msgspec.json.Decoder(list[Marker])
_groups_decoder = msgspec.json.Decoder(GroupsReply)
_bands_decoder = msgspec.json.Decoder(BandsReply)
_diff_decoder = msgspec.json.Decoder(ConfigDiff)


def _reason(response: httpx.Response) -> str:
    """The server's own words for a refusal: FastAPI puts them in ``detail``."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):  # a validation error list: keep the messages
        detail = "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)
    return str(detail)[:300]


class NissaClient(HistogramReads):
    """REST calls of the console; every failure surfaces as ``ApiError`` with a readable reason."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._http = httpx.AsyncClient(base_url=config.base, headers=config.headers,
                                       timeout=config.timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:  # httpx's own
        """One call; a read the server answers 429 (it serves everyone first) is asked again after its
        ``Retry-After`` (``BUSY_RETRIES`` times at most)."""
        for attempt in range(BUSY_RETRIES + 1):
            try:
                response = await self._http.request(method, path, **kwargs)
            except httpx.TransportError as err:
                raise ApiError(0, f"cannot reach {self.config.base}: {err or type(err).__name__}") from err
            if response.status_code != 429 or method != "GET" or attempt == BUSY_RETRIES:
                break
            await asyncio.sleep(retry_after_s(response.headers.get("Retry-After")))
        if response.status_code >= 400:
            raise ApiError(response.status_code, _reason(response))
        return response

    async def list_runs(self, limit: int | None = None) -> list[RunSummary]:
        params = {"limit": limit} if limit is not None else None
        return _runs_decoder.decode((await self._request("GET", "/runs", params=params)).content)

    async def runs_page(self, limit: int, offset: int = 0, q: str = "", sort: str = "") -> RunsPage:
        """One page of the runs matching the filter ``q`` in the order ``sort`` (the server's language)."""
        params = {k: v for k, v in (("limit", limit), ("offset", offset), ("q", q), ("sort", sort)) if v != ""}
        response = await self._request("GET", "/runs", params=params)
        runs = _runs_decoder.decode(response.content)
        total = response.headers.get("X-Total-Count", "")
        return RunsPage(runs, int(total) if total.isdigit() else offset + len(runs))

    async def run_groups(self, by: str, q: str, metrics: list[str]) -> GroupsReply:
        """Rows of the runs matching ``q`` grouped by ``by`` (``GET /run-groups``)."""
        params = {"by": by, "q": q, "metrics": ",".join(metrics)}
        return _groups_decoder.decode((await self._request("GET", "/run-groups", params=params)).content)

    async def bands(self, name: str, runs: list[str], x: str, max_points: int) -> BandsReply:
        params = {"runs": ",".join(runs), "x": x, "max_points": max_points}
        return _bands_decoder.decode((await self._request("GET", f"/run-groups/series/{name}", params=params)).content)

    async def config_diff(self, runs: list[str]) -> ConfigDiff:
        response = await self._request("GET", "/config-diff", params={"runs": ",".join(runs)})
        return _diff_decoder.decode(response.content)

    async def patch_run(self, run_id: str, **fields: object) -> RunDetail:
        """Change a run's ``tags``, ``notes`` or ``group`` (``PATCH /runs/{id}``)."""
        return _run_decoder.decode((await self._request("PATCH", f"/runs/{run_id}", json=fields)).content)

    async def series_names(self, run_id: str) -> list[str]:
        """Names of a run's series (``GET /runs/{id}/series``)."""
        items = (await self._request("GET", f"/runs/{run_id}/series")).json()
        return sorted({str(item["name"]) for item in items})

    async def series(self, run_id: str, name: str, x: str, max_points: int) -> list[dict]:
        """Every label set of one series, downsampled: ``key``, ``labels``, ``x``, ``y`` each."""
        path: str | None = f"/runs/{run_id}/series/{name}"
        params: dict | None = {"x": x, "max_points": max_points}
        out: list[dict] = []
        while path is not None:  # a reply holds a page of bytes; its Link says where the rest starts
            response = await self._request("GET", path, params=params)
            out += [item for item in response.json()["series"] if item.get("run_id", run_id) == run_id]
            path, params = response.links.get("next", {}).get("url"), None
        return out

    async def markers(self, run_id: str) -> list[Marker]:
        return _markers_decoder.decode((await self._request("GET", f"/runs/{run_id}/markers")).content)

    async def may_write(self) -> bool | None:
        """Whether the server takes this console's token for commands (``GET /auth``); None: the server
        does not say (an older one) or cannot be reached."""
        try:
            answer = (await self._request("GET", "/auth")).json()
        except (ApiError, ValueError):
            return None
        write = answer.get("write") if isinstance(answer, dict) else None
        return write if isinstance(write, bool) else None

    async def get_run(self, run_id: str) -> RunDetail:
        return _run_decoder.decode((await self._request("GET", f"/runs/{run_id}")).content)

    async def events(self, run_id: str, after_seq: int = 0, limit: int = 1000,
                     rank: int | None = None) -> list[Event]:
        params: dict[str, int] = {"after_seq": after_seq, "limit": limit}
        if rank is not None:
            params["rank"] = rank
        response = await self._request("GET", f"/runs/{run_id}/events", params=params)
        return decode_events(response.content)

    async def all_events(self, run_id: str, max_events: int, page: int = 1000) -> list[Event]:
        """Every stored event of every rank (the server's own included), up to ``max_events``."""
        run = await self.get_run(run_id)
        ranks = {0, -1} | {int(r) for r in run.last_seq}
        out: list[Event] = []
        for rank in sorted(ranks, key=lambda r: (r < 0, r)):
            after = 0
            while len(out) < max_events:
                batch = await self.events(run_id, after_seq=after, limit=page, rank=rank)
                out.extend(batch[: max_events - len(out)])
                if not batch:  # a page may hold fewer than asked for (it is bounded by bytes too)
                    break
                after = batch[-1].seq
        # Ranks interleave by time; the server's own events (rank -1) after a trainer's at equal ts.
        out.sort(key=lambda e: (e.ts, e.rank < 0, e.rank, e.seq))
        return out

    async def escalate(self, request: EscalateRequest) -> str:
        """``POST /escalate`` with the contract's own struct; returns the new command's id. Sent with an
        ``Idempotency-Key``: one that got no answer (a loaded server past the timeout) is sent again, ``SEND_TRIES``
        times in all, and the server queues it once."""
        headers = {"content-type": "application/json", "Idempotency-Key": uuid.uuid4().hex}
        body = msgspec.json.encode(request)
        tries = 1
        while True:
            try:
                response = await self._request("POST", "/escalate", content=body, headers=headers)
                return str(response.json()["command_id"])
            except ApiError as err:
                if err.status != 0 or tries == SEND_TRIES:
                    raise
                tries += 1

    async def sweeps(self) -> list[SweepInfo]:
        return _sweeps_decoder.decode((await self._request("GET", "/sweeps")).content)

    async def sweep_view(self, sweep_id: str) -> SweepView:
        """``GET /sweeps/{id}/view``: the sweep as the page shows it too."""
        reply = await self._request("GET", f"/sweeps/{quote(sweep_id, safe='')}/view")
        return _sweep_view_decoder.decode(reply.content)

    async def stop_sweep(self, sweep_id: str) -> None:
        await self._request("POST", f"/sweeps/{quote(sweep_id, safe='')}/stop")

    async def command(self, command_id: str) -> CommandRecord:
        return _command_decoder.decode((await self._request("GET", f"/commands/{command_id}")).content)

    def artifact_url(self, run_id: str, artifact: str) -> str:
        """The server's URL of a run's artifact, from the name the run gave: always on this server (a run
        names its artifact, it never picks where the console's link goes)."""
        base = self.config.base
        if artifact.startswith(f"{base}/"):
            return artifact
        name = quote(artifact.rsplit("/", 1)[-1], safe="")
        return f"{base}/runs/{quote(run_id, safe='')}/artifacts/{name}"


ConnState = Literal["connecting", "connected", "reconnecting", "unauthorized"]


@dataclass(frozen=True)
class Connection:
    """A change of the stream's connection: what it is now, and why."""

    state: ConnState
    attempt: int = 0
    delay_s: float = 0.0
    detail: str = ""


class WatchStream:
    """``ws /ws/watch`` as an endless async iterator of ``EventBatch`` and ``Connection`` items."""

    def __init__(self, config: ClientConfig, run_id: str | None, after_seq: int = 0) -> None:
        self.config = config
        self.run_id = run_id
        self.after_seq = after_seq
        self.cursor: int | None = None  # server id of the last event delivered; None until one is
        self.reconnects = 0

    def url(self) -> str:
        params: dict[str, str | int] = {}
        if self.run_id:
            params["run_id"] = self.run_id
        if self.cursor is not None:
            params["after_id"] = self.cursor
        else:
            params["after_seq"] = self.after_seq
        return f"{self.config.ws_base}/ws/watch?{urlencode(params)}"

    def _delay(self, attempt: int) -> float:
        base = min(self.config.backoff_max_s, self.config.backoff_initial_s * 2 ** max(attempt - 1, 0))
        return base * random.uniform(0.8, 1.0)  # jitter so many consoles do not reconnect in step

    async def __aiter__(self) -> AsyncIterator[EventBatch | Connection]:
        attempt = 0
        while True:
            yield Connection("connecting" if attempt == 0 else "reconnecting", attempt)
            try:
                async with connect(self.url(), additional_headers=self.config.headers,
                                   open_timeout=self.config.timeout_s, max_size=2 * MAX_FRAME_BYTES,
                                   ping_interval=10, ping_timeout=20) as ws:
                    attempt = 0
                    yield Connection("connected")
                    async for raw in ws:
                        batch = self._decode(raw)
                        if batch is not None:
                            yield batch
                    detail = "server closed the stream"
            except ConnectionClosed as err:
                code = err.rcvd.code if err.rcvd else None
                detail = f"closed ({code}: {err.rcvd.reason if err.rcvd else 'no close frame'})"
                if code == CLOSE_UNAUTHORIZED:
                    yield Connection("unauthorized", attempt, 0.0, detail)
                    return
            except InvalidStatus as err:
                status = err.response.status_code
                detail = f"handshake refused with HTTP {status}"
                if status in (401, 403):
                    yield Connection("unauthorized", attempt, 0.0, detail)
                    return
            except (OSError, TimeoutError, InvalidHandshake, InvalidURI, websockets.WebSocketException) as err:
                detail = f"{type(err).__name__}: {err}"
            attempt += 1
            self.reconnects += 1
            delay = self._delay(attempt)
            logger.info("watch %s: %s; reconnecting in %.2fs (cursor %s)", self.run_id, detail, delay, self.cursor)
            yield Connection("reconnecting", attempt, delay, detail)
            await asyncio.sleep(delay)

    def _decode(self, raw: str | bytes) -> EventBatch | None:
        try:
            frame = decode_frame(raw)
        except DecodeError as err:
            # A frame we cannot read is the server's bug; skip it and say so rather than loop on it.
            logger.warning("watch %s: undecodable frame skipped: %s", self.run_id, err)
            return None
        if not isinstance(frame, EventBatch):
            logger.debug("watch %s: ignoring %s frame", self.run_id, type(frame).__name__)
            return None
        if frame.events:
            self.cursor = frame.cursor
        return frame
