"""What a run's page shows beside its charts, each defined once for the console and the page: what it steers a
run with beside the commands' schema (``GET /ui/steer.json``: the console's texts, ``leyline.steering``), what the
run's commands brought back (``GET /runs/{run_id}/profiles``: its closed profile windows, each with its top
operators' table, ``leyline.panels``) and an Esper run's panels (``GET /runs/{run_id}/esper``: env grid, seed log,
PPO health, level and windows, folded from its latest events by ``leyline.esper.panels``)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import APIRouter, Query, Request, Response

from leyline import Event, ProfileCompleted, RunStarted
from leyline.codec import decode_event
from leyline.enums import EventKind, Kind
from leyline.esper.panels import (
    PANELS,
    SEED_KINDS,
    SEED_LOG_ROWS,
    TAIL_KINDS,
    EsperPanels,
    fold,
    starting_level,
)
from leyline.panels import ProfileWindow, profile_window
from leyline.steering import SteerDefinitions
from nissa_server.access import Access, guarded
from nissa_server.deps import KnownRun, NissaDep, StoreDep
from nissa_server.openapi import EXAMPLES, Responses, error, ok, ref
from nissa_server.reads import BUSY
from nissa_server.routes.common import json_response
from nissa_server.store.conn import Conn
from nissa_server.store.queries import stream_events

router = guarded(Access.READ, tags=["runs"])
pages = APIRouter(tags=["web page"])
"""Open to anyone (``access.OPEN_ROUTES``)."""
_REFUSED: Responses = {401: error("Reads need the bearer token (server started with --read-auth)",
                                  "missing or wrong bearer token"),
                       404: error("No such run", "unknown run 'r-x'")}


def newest_of_kind(conn: Conn, run_key: int, kind: Kind, limit: int) -> list[bytes]:
    """The newest ``limit`` stored events of an indexed kind of a run, newest first (an index read: bounded)."""
    rows = conn.execute("SELECT body FROM rare_events WHERE run_key = ? AND kind = ? ORDER BY seq DESC, rank DESC "
                        "LIMIT ?", (run_key, kind.value, limit)).fetchall()
    return [bytes(row[0]) for row in rows]


def _decoded(bodies: list[bytes]) -> list[Event]:
    out = []
    for body in bodies:
        try:
            out.append(decode_event(body))
        except msgspec.DecodeError:  # stored by an older server, in a shape this one no longer reads
            continue
    return out


def _profiles(conn: Conn, run_key: int, limit: int) -> list[ProfileWindow]:
    events = _decoded(newest_of_kind(conn, run_key, EventKind.PROFILE_COMPLETED, limit))
    return [profile_window(e.payload, e.rank) for e in events if isinstance(e.payload, ProfileCompleted)]


TAIL_EVENTS = 4000
"""Events an Esper panels read looks back over, its ranks' streams together, for the latest epoch of each env and
the latest update (a bounded read: what is older than that is not the latest)."""
MIN_RANK_TAIL = 256
MAX_TAIL_RANKS = 16
"""Ranks whose envs a grid shows (``TAIL_EVENTS // MAX_TAIL_RANKS`` events of each at the least)."""
_TAIL_KINDS = frozenset(k.value for k in TAIL_KINDS)
_LATEST_KINDS = (EventKind.TELEMETRY_LEVEL_CHANGED, EventKind.PROFILE_STARTED, EventKind.PROFILE_COMPLETED)


def _esper(conn: Conn, run_key: int) -> EsperPanels:
    bodies: list[bytes] = []
    streams = conn.execute("SELECT rank, last_seq FROM streams WHERE run_key = ? AND rank >= 0",
                           (run_key,)).fetchall()
    tail = max(TAIL_EVENTS // max(len(streams), 1), MIN_RANK_TAIL)  # a run of many ranks: a share each
    for rank, last in streams[:MAX_TAIL_RANKS]:
        bodies.extend(body for _, body in stream_events(conn, run_key, rank, max(1, last - tail + 1), _TAIL_KINDS))
    for kind in SEED_KINDS:
        bodies.extend(newest_of_kind(conn, run_key, kind, SEED_LOG_ROWS))
    for kind in _LATEST_KINDS:
        bodies.extend(newest_of_kind(conn, run_key, kind, 1))
    started = [e.payload for e in _decoded(newest_of_kind(conn, run_key, EventKind.RUN_STARTED, 1))]
    level = starting_level(started[0].config) if started and isinstance(started[0], RunStarted) else None
    events = sorted(_decoded(bodies), key=lambda e: (e.ts, e.rank, e.seq))
    return fold(events, level=level.value if level is not None else None)


@router.get("/runs/{run_id}/profiles", summary="A run's closed profile windows, newest first, each with its top "
            "operators (the console's table) and where its trace is", response_class=Response,
            responses={200: ok({"type": "array", "items": ref(ProfileWindow)}, EXAMPLES["profiles"]), **_REFUSED})
async def list_profiles(store: StoreDep, run: KnownRun,
                        limit: Annotated[int, Query(ge=1, le=100, description="newest first, at most this many")] = 20,
                        ) -> Response:
    return json_response(await store.read(_profiles, run.run_key, limit))


@pages.get("/ui/steer.json", summary="What the web page says before it steers a run (the console's texts), beside "
           "the commands' schema", response_class=Response,
            responses={200: ok(ref(SteerDefinitions), msgspec.to_builtins(SteerDefinitions()))})
async def steer_definitions() -> Response:
    return json_response(SteerDefinitions())


@router.get(f"/runs/{{run_id}}/{PANELS}", summary="An Esper run's panels, as the console shows them: each env's latest "
            "accuracy and seeds, the seed lifecycle log, PPO health, the telemetry level and windows in force",
            response_class=Response,
            responses={200: ok(ref(EsperPanels), EXAMPLES["esper"]), **_REFUSED, **BUSY})
async def esper_panels(request: Request, n: NissaDep, run: KnownRun) -> Response:
    async with n.reads.client(request), n.reads.slot(run.run_id):  # a costly read: one of a client's few
        return json_response(await n.store.read(_esper, run.run_key))
