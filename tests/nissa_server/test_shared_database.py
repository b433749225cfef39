"""Several servers on one PostgreSQL database: ids in commit order whoever commits, events and
commands carried between servers by the database's notifications, one writer per stream."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from leyline.frames import CLOSE_SUPERSEDED
from nissa_server.settings import Settings
from tests.support import (
    IngestClient,
    async_wait_for,
    close_of,
    collect_watch,
    events_for,
    running_server,
    wait_status,
)
from tests.support.databases import database_for, side_connection
from tests.support.stores import settled, started, write_for

pytestmark = pytest.mark.postgresql_only


def _waiting_on_a_lock(settings) -> bool:
    side = side_connection(settings)
    try:
        return side.execute("SELECT COUNT(*) FROM pg_locks WHERE NOT granted").fetchone()[0] > 0
    finally:
        side.close()


async def test_a_transaction_that_took_ids_first_commits_first(tmp_path):
    # With ids from a sequence, B would commit 4..6 while A still held 1..3: a watcher reading
    # id > cursor would pass 1..3 for good. Under the counter's lock B waits for A's commit.
    settings_url = database_for(tmp_path)["db_url"]
    a, (run_a,) = await started(tmp_path, "a-run", url=settings_url)
    b, (run_b,) = await started(tmp_path, "b-run", url=settings_url)
    published: dict[str, list[tuple[str, int]]] = {"a": [], "b": []}
    a.on_publish = lambda ws: published["a"].extend((w.run_id, w.first_id) for w in ws)
    b.on_publish = lambda ws: published["b"].extend((w.run_id, w.first_id) for w in ws)
    holding, release = threading.Event(), threading.Event()
    slow = write_for(run_a, 3)
    rows = list(slow.rows)

    def hold(conn, write) -> None:  # inside A's transaction, after it took its ids
        write.rows.extend(rows)
        holding.set()
        release.wait(30)

    slow.prepare = hold
    await a.submit_built(lambda: slow)
    await asyncio.to_thread(holding.wait, 30)
    fast = await b.submit_built(lambda: write_for(run_b, 3))
    settings = Settings(db_url=settings_url)
    await async_wait_for(lambda: asyncio.to_thread(_waiting_on_a_lock, settings), message="B waits for A")
    side = side_connection(settings)
    visible = side.execute("SELECT COUNT(*) FROM event_blocks").fetchone()[0]
    side.close()
    release.set()
    await settled(a)
    await settled(b)
    await a.close()
    await b.close()
    assert visible == 0, "B committed while A, which took its ids first, had not"
    assert (slow.first_id, fast.first_id) == (1, 4)
    assert published["a"] == published["b"] == [("a-run", 1), ("b-run", 4)]


async def test_ingest_on_one_server_a_watcher_on_another_and_a_command_from_a_third(tmp_path):
    url = database_for(tmp_path)["db_url"]
    with running_server(tmp_path / "a", db_url=url) as a, running_server(tmp_path / "b", db_url=url) as b, \
            running_server(tmp_path / "c", db_url=url) as c:
        watch = asyncio.create_task(collect_watch(b, 61, run_id="spread"))
        async with IngestClient(a, "spread") as trainer:
            for start in range(1, 61, 20):
                await trainer.send(events_for("spread", 20, start_seq=start))
            await trainer.wait_ack(60)
            async with httpx.AsyncClient(base_url=c, timeout=30) as http:
                resp = await http.post("/escalate", json={"run_id": "spread", "action": "debug", "epochs": 1})
                assert resp.status_code == 202
                command = await trainer.wait_command()
                assert command.command_id == resp.json()["command_id"]
                run = (await http.get("/runs/spread")).json()
                assert run["connected"] is True and run["status"] == "live"  # held by server a
        events, _ = await watch
    assert [(e["rank"], e["seq"]) for e in events] == [(0, s) for s in range(1, 61)] + [(-1, 1)]


async def test_a_trainer_moving_to_another_server_closes_its_old_connection(tmp_path):
    url = database_for(tmp_path)["db_url"]
    with running_server(tmp_path / "a", db_url=url) as a, running_server(tmp_path / "b", db_url=url) as b:
        async with IngestClient(a, "moved") as old:
            await old.send(events_for("moved", 5))
            await old.wait_ack(5)
            async with IngestClient(b, "moved") as new:
                assert new.welcome.last_seq == 5
                code, reason = await close_of(old.ws)
                assert code == CLOSE_SUPERSEDED and "moved" in reason
                await new.send(events_for("moved", 8)[5:])
                assert await new.wait_ack(8) == 8
        async with httpx.AsyncClient(base_url=a, timeout=30) as http:
            events = (await http.get("/runs/moved/events")).json()
    assert [e["seq"] for e in events] == list(range(1, 9))


async def test_a_run_deleted_on_one_server_is_forgotten_by_the_others(tmp_path):
    url = database_for(tmp_path)["db_url"]
    with running_server(tmp_path / "a", db_url=url, lost_after_s=0.2, maintenance_interval_s=0.05) as a, \
            running_server(tmp_path / "b", db_url=url, open=True) as b:
        async with IngestClient(a, "brief") as trainer:
            await trainer.send(events_for("brief", 3))
            await trainer.wait_ack(3)
        await wait_status(b, "brief", "lost")
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.get(f"{a}/runs/brief/events")).status_code == 200  # a has it cached
            assert (await http.delete(f"{b}/runs/brief")).json()["events"] == 3
            await async_wait_for(lambda: _gone(http, f"{a}/runs/brief/events"), message="a forgets the run")


async def _gone(http: httpx.AsyncClient, url: str) -> bool:
    return (await http.get(url)).status_code == 404


async def test_a_take_over_told_late_does_not_close_the_connection_that_came_after_it(tmp_path):
    # Told in commit order but read late by a loaded server, the take of a connection that had already ended
    # closed the trainer's next one ("a newer connection took over"); the database says who holds the stream.
    import psycopg

    url = database_for(tmp_path)["db_url"]
    with running_server(tmp_path / "a", db_url=url) as a:
        async with IngestClient(a, "late") as first:
            await first.send(events_for("late", 3))
            await first.wait_ack(3)
        async with IngestClient(a, "late") as second:
            with psycopg.connect(url, autocommit=True) as side:
                (key,) = side.execute("SELECT run_key FROM runs WHERE run_id = 'late'").fetchone()
                side.execute("SELECT pg_notify('nissa_streams', %s)", (f"{key}:0:an-older-session",))
            await asyncio.sleep(1.0)  # the note is read and handled in this time on an idle machine
            await second.send(events_for("late", 5)[3:])
            assert await second.wait_ack(5) == 5
        async with httpx.AsyncClient(base_url=a, timeout=30) as http:
            events = (await http.get("/runs/late/events")).json()
    assert [e["seq"] for e in events] == list(range(1, 6))
