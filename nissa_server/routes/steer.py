"""What the web page steers a run with beside the commands' schema (``GET /ui/steer.json``: the texts the console
shows too, ``leyline.steering``), and what a run's commands brought back as its page shows it: ``GET
/runs/{run_id}/profiles`` (its closed profile windows, each with its top operators' table, the console's figures:
``leyline.panels``)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Query, Response

from leyline import ProfileCompleted
from leyline.codec import decode_event
from leyline.enums import EventKind
from leyline.panels import ProfileWindow, profile_window
from leyline.steering import SteerDefinitions
from nissa_server.deps import KnownRun, StoreDep, require_read
from nissa_server.openapi import EXAMPLES, Responses, error, ok, ref
from nissa_server.routes.common import json_response
from nissa_server.store.conn import Conn

router = APIRouter(tags=["runs"])
READ = [Depends(require_read)]
_REFUSED: Responses = {401: error("Reads need the bearer token (server started with --read-auth)",
                                  "missing or wrong bearer token"),
                       404: error("No such run", "unknown run 'r-x'")}


def newest_of_kind(conn: Conn, run_key: int, kind: EventKind, limit: int) -> list[bytes]:
    """The newest ``limit`` stored events of an indexed kind of a run, newest first (an index read: bounded)."""
    rows = conn.execute("SELECT body FROM rare_events WHERE run_key = ? AND kind = ? ORDER BY seq DESC, rank DESC "
                        "LIMIT ?", (run_key, kind.value, limit)).fetchall()
    return [bytes(row[0]) for row in rows]


def _profiles(conn: Conn, run_key: int, limit: int) -> list[ProfileWindow]:
    out = []
    for body in newest_of_kind(conn, run_key, EventKind.PROFILE_COMPLETED, limit):
        try:
            event = decode_event(body)
        except msgspec.DecodeError:  # stored by an older server, in a shape this one no longer reads
            continue
        if isinstance(event.payload, ProfileCompleted):
            out.append(profile_window(event.payload, event.rank))
    return out


@router.get("/runs/{run_id}/profiles", summary="A run's closed profile windows, newest first, each with its top "
            "operators (the console's table) and where its trace is", response_class=Response, dependencies=READ,
            responses={200: ok({"type": "array", "items": ref(ProfileWindow)}, EXAMPLES["profiles"]), **_REFUSED})
async def list_profiles(store: StoreDep, run: KnownRun,
                        limit: Annotated[int, Query(ge=1, le=100, description="newest first, at most this many")] = 20,
                        ) -> Response:
    return json_response(await store.read(_profiles, run.run_key, limit))


@router.get("/ui/steer.json", summary="What the web page says before it steers a run (the console's texts), beside "
            "the commands' schema", response_class=Response, tags=["web page"],
            responses={200: ok(ref(SteerDefinitions), msgspec.to_builtins(SteerDefinitions()))})
async def steer_definitions() -> Response:
    return json_response(SteerDefinitions())
