"""Stores driven directly (no server around them): open one on the test's database, build writes,
wait until what was queued is committed and published."""

from __future__ import annotations

import pathlib
import time
from typing import Any

from leyline import encode
from leyline.codec import decode_frame_wire
from leyline.frames import EventBatch
from nissa_server.batches import build_write
from nissa_server.runs import RunState
from nissa_server.settings import Settings
from nissa_server.store import EventWrite, Store, create_store, sql
from tests.support.clients import events_for
from tests.support.databases import database_for
from tests.support.waiting import async_wait_for

SESSION = "test:session"


def write_for(run: RunState, n: int, start: int = 1, session: str | None = SESSION) -> EventWrite:
    batch = decode_frame_wire(encode(EventBatch(events=events_for(run.run_id, n, start_seq=start))))
    return build_write(run, 0, run.stream(0), batch.events, max_event_bytes=1 << 20, session=session)[0]


async def started(tmp_path: pathlib.Path, *runs: str, url: str | None = None,
                  **kw: Any) -> tuple[Store, list[RunState]]:
    store = create_store(url or Settings(**database_for(tmp_path)).database, **kw)
    store.open()
    store.start()
    states = []
    for run_id in runs:
        def claim(conn, run_id=run_id):
            row = sql.claim_run(conn, run_id, "", b"x" * 32, live=True, now=time.time())
            sql.take_stream(conn, row.run_key, 0, SESSION, time.time() + 60)
            return row

        row = await store.call(claim)
        states.append(store.registry.remember(row.run_key, row.run_id, row.name, row.secret_hash))
    return store, states


async def settled(store: Store) -> None:
    """Everything queued so far is committed and published (on PostgreSQL publication follows the
    database's notification)."""
    await store.call(lambda conn: None)
    last = await store.read(sql.read_counter, "event_id")
    await async_wait_for(lambda: _at(store, last), message="publication caught up")


async def _at(store: Store, last: int) -> bool:
    return store.published_upto >= last


def failing(store: Store):
    def prepare(conn, write):
        raise store.errors[0]("disk I/O error")

    return prepare


