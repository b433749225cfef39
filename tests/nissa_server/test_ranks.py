"""A run of several ranks is one run: each rank's state, degraded while one is silent, ended (a rank that
stopped without finishing named) once none runs, commands completed when every rank completed them, and
watchers that follow one rank."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx
import pytest

from leyline import (
    CommandAction,
    CommandStatus,
    CommandStatusChanged,
    Heartbeat,
    RunFinished,
    RunResumed,
    RunStarted,
    make_event,
)
from tests.support import IngestClient, collect_watch, running_server
from tests.support.databases import database_for
from tests.support.waiting import async_wait_for

FAST = {"maintenance_interval_s": 0.2, "rank_silent_after_s": 1.0}
STEADY = {**FAST, "rank_silent_after_s": 60.0}
"""For tests that read a rank's state after its last event: with FAST it is silent 1 s later, a window a read
on a loaded machine can miss."""


class Rank:
    """One rank of a fake two-rank trainer: its own connection and seqs."""

    def __init__(self, client: IngestClient) -> None:
        self.client, self.seq = client, 0

    async def send(self, payload, *, step: int = 0, epoch: int = 0) -> None:
        self.seq += 1
        await self.client.send([make_event(payload, run_id=self.client.run_id, seq=self.seq, ts=time.time(),
                                           rank=self.client.rank, step=step, epoch=epoch)])
        await self.client.wait_ack(self.seq)

    async def start(self) -> None:
        await self.send(RunStarted(name="two", config={}, host="node", pid=100 + self.client.rank, world_size=2))

    async def beat(self, step: int) -> None:
        await self.send(Heartbeat(uptime_s=1.0), step=step, epoch=step // 4)


@contextlib.asynccontextmanager
async def two_ranks(url: str, run_id: str):
    async with IngestClient(url, run_id, rank=0) as c0, IngestClient(url, run_id, rank=1) as c1:
        ranks = (Rank(c0), Rank(c1))
        for rank in ranks:
            await rank.start()
        yield ranks


async def _run(http: httpx.AsyncClient, run_id: str) -> dict:
    return (await http.get(f"/runs/{run_id}")).json()


async def _until(http: httpx.AsyncClient, run_id: str, check, what: str, timeout: float = 20.0) -> dict:
    seen: dict = {}

    async def reached() -> bool:
        seen.update(await _run(http, run_id))
        return check(seen)

    try:
        await async_wait_for(reached, timeout=timeout, message=f"run {run_id}: {what}")
    except AssertionError as timed_out:  # the state last read, not the empty one the wait began with
        raise AssertionError(f"{timed_out} (last read: {seen})") from None
    return seen


async def _beating(rank: Rank) -> None:
    """A rank alive: a heartbeat every 0.2 s (well within FAST's 1 s of silence) until cancelled."""
    step = 0
    while True:
        step += 1
        await rank.beat(step)
        await asyncio.sleep(0.2)


async def test_a_run_of_two_ranks_is_one_run_with_each_ranks_state(tmp_path):
    with running_server(tmp_path, **STEADY) as url:
        async with two_ranks(url, "two-1") as (r0, r1), httpx.AsyncClient(base_url=url, timeout=10) as http:
            await r0.beat(12)
            await r1.beat(10)
            runs = (await http.get("/runs")).json()
            assert [r["run_id"] for r in runs] == ["two-1"]
            run = await _run(http, "two-1")
            assert run["world_size"] == 2 and run["status"] == "live"
            assert [(r["rank"], r["status"], r["last_step"], r["pid"], r["connected"]) for r in run["ranks"]] == [
                (0, "live", 12, 100, True), (1, "live", 10, 101, True)]
            assert all(r["seen_at"] and r["last_seq"] == 2 for r in run["ranks"])


async def test_a_run_of_one_rank_ends_its_rank_too(tmp_path):
    # The run ended but its one rank stayed "live": a console's ranks panel showed a finished run running.
    with running_server(tmp_path, **FAST) as url:
        async with IngestClient(url, "one-1", rank=0) as client, httpx.AsyncClient(base_url=url, timeout=10) as http:
            rank = Rank(client)
            await rank.send(RunStarted(name="one", config={}, host="node", pid=100, world_size=1))
            await rank.beat(5)
            await rank.send(RunFinished(status="completed", duration_s=1.0), step=6, epoch=1)
            run = await _run(http, "one-1")
            assert run["status"] == "finished"
            assert [(r["rank"], r["status"], r["last_step"]) for r in run["ranks"]] == [(0, "finished", 6)]
            assert run["ranks"][0]["ended_at"] is not None


async def test_a_silent_rank_degrades_the_run_names_it_and_comes_back(tmp_path):
    with running_server(tmp_path, **FAST) as url:
        async with two_ranks(url, "two-2") as (r0, r1), httpx.AsyncClient(base_url=url, timeout=10) as http:
            beats = [asyncio.create_task(_beating(r0))]
            try:
                run = await _until(http, "two-2", lambda r: r["status"] == "degraded", "degraded")
                assert "rank 1" in run["status_detail"] and "rank 0" not in run["status_detail"]
                assert [r["status"] for r in run["ranks"]] == ["live", "silent"]
                # Rank 1 comes back and stays: one heartbeat alone makes it live for only 1 s, a window a read
                # on a loaded machine can miss (then it is silent again, and the run degraded for good).
                beats.append(asyncio.create_task(_beating(r1)))
                run = await _until(http, "two-2", lambda r: r["status"] == "live", "live again")
                assert run["status_detail"] is None and [r["status"] for r in run["ranks"]] == ["live", "live"]
                accepted = await http.post("/escalate", json={"run_id": "two-2", "action": "debug", "epochs": 1})
                assert accepted.status_code == 202
            finally:
                for task in beats:
                    task.cancel()


async def test_a_rank_that_stops_without_finishing_fails_the_run_named(tmp_path):
    with running_server(tmp_path, **FAST) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            async with two_ranks(url, "two-3") as (r0, r1):
                cid = (await http.post("/escalate", json={"run_id": "two-3", "action": "debug", "epochs": 1})
                       ).json()["command_id"]
                await r0.send(_status(cid, CommandStatus.APPLIED, 4), step=4)
                await r1.send(_status(cid, CommandStatus.APPLIED, 4), step=4)
                await r1.client.ws.close()  # rank 1 dies: its connection closes, it never finishes
                await r0.send(RunFinished(status="interrupted", duration_s=1.0), step=8)
                run = await _run(http, "two-3")
                assert run["status"] in ("live", "degraded"), "rank 1 may still be delivering"
                run = await _until(http, "two-3", lambda r: r["status"] == "failed", "failed")
            assert run["status_detail"] == "rank 1 stopped without finishing"
            assert [r["status"] for r in run["ranks"]] == ["interrupted", "lost"]
            assert run["finish"]["status"] == "interrupted"
            record = (await http.get(f"/commands/{cid}")).json()  # rank 1 will never finish it
            assert record["status"] == "failed" and record["message"] == "rank 1 stopped without finishing the command"


async def test_the_run_ends_when_every_rank_has(tmp_path):
    with running_server(tmp_path, **FAST) as url:
        async with two_ranks(url, "two-4") as (r0, r1), httpx.AsyncClient(base_url=url, timeout=10) as http:
            await r0.send(RunFinished(status="completed", duration_s=1.0), step=8)
            assert (await _run(http, "two-4"))["status"] == "live"  # rank 1 still trains
            await r1.send(RunFinished(status="completed", duration_s=1.0), step=8)
            run = await _run(http, "two-4")
            assert run["status"] == "finished" and run["status_detail"] is None
            assert [r["status"] for r in run["ranks"]] == ["finished", "finished"]


def _status(command_id: str, status: CommandStatus, step: int | None = None, message: str = "",
            result: dict | None = None) -> CommandStatusChanged:
    return CommandStatusChanged(command_id=command_id, action=CommandAction.DEBUG, status=status,
                                applied_step=step, message=message, result=result)


async def test_a_command_completes_when_every_rank_has_and_fails_naming_the_rank(tmp_path):
    with running_server(tmp_path, **FAST) as url:
        async with two_ranks(url, "two-5") as (r0, r1), httpx.AsyncClient(base_url=url, timeout=10) as http:
            ok = (await http.post("/escalate", json={"run_id": "two-5", "action": "debug", "epochs": 1})).json()
            bad = (await http.post("/escalate", json={"run_id": "two-5", "action": "debug", "epochs": 2})).json()
            cid, bid = ok["command_id"], bad["command_id"]
            assert (await r0.client.wait_command()).command_id == cid  # every rank's connection gets it
            assert (await r1.client.wait_command()).command_id == cid
            await r0.send(_status(cid, CommandStatus.APPLIED, 8), step=8)
            await r0.send(_status(cid, CommandStatus.COMPLETED, 8, result={"closed_epoch": 3}), step=12)
            await r1.send(_status(cid, CommandStatus.APPLIED, 8), step=8)
            record = (await http.get(f"/commands/{cid}")).json()
            assert record["status"] == "applied" and record["applied_step"] == 8
            assert record["message"] == "waiting for rank 1"
            await r1.send(_status(cid, CommandStatus.DELIVERED), step=9)  # late: a rank never goes back
            await r1.send(_status(cid, CommandStatus.COMPLETED, 8, result={"closed_epoch": 3}), step=12)
            record = (await http.get(f"/commands/{cid}")).json()
            assert record["status"] == "completed" and record["applied_step"] == 8
            assert [(r["rank"], r["status"], r["applied_step"]) for r in record["ranks"]] == [
                (0, "completed", 8), (1, "completed", 8)]
            assert record["result"] == {"closed_epoch": 3}

            await r0.send(_status(bid, CommandStatus.APPLIED, 12), step=12)
            await r1.send(_status(bid, CommandStatus.FAILED, message="out of memory"), step=12)
            record = (await http.get(f"/commands/{bid}")).json()
            assert record["status"] == "failed" and record["message"] == "rank 1: out of memory"
            await r0.send(_status(bid, CommandStatus.COMPLETED, 12), step=16)
            assert (await http.get(f"/commands/{bid}")).json()["status"] == "failed"  # final stays final
            listed = (await http.get("/runs/two-5/commands")).json()
            assert {c["command_id"]: len(c["ranks"]) for c in listed} == {cid: 2, bid: 2}


async def test_stacks_a_rank_never_answers_fail_naming_it_and_keep_the_others(tmp_path):
    # A stopped rank cannot answer: the command stayed open for good, the ranks that answered hidden behind it.
    with running_server(tmp_path, **FAST, stacks_answer_s=1.0) as url:
        async with two_ranks(url, "two-s") as (r0, r1), httpx.AsyncClient(base_url=url, timeout=10) as http:
            cid = (await http.post("/escalate", json={"run_id": "two-s", "action": "stacks"})).json()["command_id"]
            assert (await r0.client.wait_command()).command_id == cid
            await r0.send(CommandStatusChanged(command_id=cid, action=CommandAction.STACKS,
                                               status=CommandStatus.COMPLETED, applied_step=4,
                                               result={"rank": 0, "stacks": "Thread 0x1"}), step=4)
            record = (await http.get(f"/commands/{cid}")).json()
            assert record["status"] == "applied"  # waiting for rank 1, not failed before its time

            async def closed() -> bool:
                record.update((await http.get(f"/commands/{cid}")).json())
                return record["status"] == "failed"

            await async_wait_for(closed, timeout=20, message="the stacks command failed")
            assert record["message"].startswith("no answer from rank 1 within 1 s"), record["message"]
            assert [(r["rank"], r["status"]) for r in record["ranks"]] == [(0, "completed")]
            assert record["ranks"][0]["result"]["stacks"] == "Thread 0x1"


async def test_a_watcher_follows_one_rank_in_replay_and_live(tmp_path):
    with running_server(tmp_path, **FAST) as url:
        async with two_ranks(url, "two-6") as (r0, r1):
            await r0.beat(1)
            await r1.beat(1)

            async def later() -> None:
                await asyncio.sleep(0.5)
                await r0.beat(2)
                await r1.beat(2)

            task = asyncio.create_task(later())
            events, _ = await collect_watch(url, 3, run_id="two-6", rank=1)
            await task
            assert [(e["rank"], e["seq"]) for e in events] == [(1, 1), (1, 2), (1, 3)]
            resumed, _ = await collect_watch(url, 1, run_id="two-6", rank=1, after_seq=2)
            assert [(e["rank"], e["seq"]) for e in resumed] == [(1, 3)]
            page = httpx.get(f"{url}/runs/two-6/events", params={"rank": 0}, timeout=10).json()
            assert {e["rank"] for e in page} == {0} and len(page) == 3


async def test_a_bad_rank_filter_is_refused_with_a_reason(tmp_path):
    from websockets.asyncio.client import connect

    from tests.support import close_of, ws_url

    with running_server(tmp_path, **FAST) as url:
        for bad in ("x", "-2", "70000"):
            async with connect(ws_url(url, "/ws/watch", run_id="r", rank=bad), open_timeout=30) as ws:
                code, reason = await close_of(ws)
                assert code == 4400 and reason.startswith("bad rank"), (bad, code, reason)


@pytest.mark.postgresql_only
async def test_ranks_streaming_to_two_servers_of_one_database_are_one_run(tmp_path):
    url = database_for(tmp_path)["db_url"]
    with running_server(tmp_path / "a", db_url=url, **FAST) as a, running_server(tmp_path / "b", db_url=url,
                                                                                  **FAST) as b:
        async with IngestClient(a, "two-7", rank=0) as c0, IngestClient(b, "two-7", rank=1) as c1, \
                httpx.AsyncClient(base_url=b, timeout=10) as http:
            r0, r1 = Rank(c0), Rank(c1)
            await r0.start()
            await r1.start()
            # A watcher of rank 1 on the other server: seq 1 replayed from the database, the rest live
            # through the other server's notifications, rank 0's events left out either way.
            watcher = asyncio.create_task(collect_watch(a, 5, run_id="two-7", rank=1))
            await r0.beat(4)
            await r1.beat(4)
            run = await _run(http, "two-7")
            assert run["world_size"] == 2 and [(r["rank"], r["connected"]) for r in run["ranks"]] == [
                (0, True), (1, True)]
            cid = (await http.post("/escalate", json={"run_id": "two-7", "action": "debug", "epochs": 1})
                   ).json()["command_id"]
            assert (await c0.wait_command()).command_id == cid and (await c1.wait_command()).command_id == cid
            for rank in (r0, r1):
                await rank.send(_status(cid, CommandStatus.APPLIED, 8), step=8)
                await rank.send(_status(cid, CommandStatus.COMPLETED, 8), step=12)
            record = httpx.get(f"{a}/commands/{cid}", timeout=10).json()
            assert record["status"] == "completed" and [r["applied_step"] for r in record["ranks"]] == [8, 8]
            await r0.send(RunFinished(status="completed", duration_s=1.0), step=12)
            await r1.send(RunFinished(status="completed", duration_s=1.0), step=12)
            assert httpx.get(f"{a}/runs/two-7", timeout=10).json()["status"] == "finished"
            events, _ = await watcher
            assert [(e["rank"], e["seq"]) for e in events] == [(1, seq) for seq in range(1, 6)]


async def test_a_run_of_two_ranks_stopped_then_resumed(tmp_path):
    """Both ranks end ``stopped``: the run is stopped; both resume: it is live again, each rank live."""
    with running_server(tmp_path, **STEADY) as url:
        async with two_ranks(url, "two-stop") as ranks, httpx.AsyncClient(base_url=url, timeout=10) as http:
            for rank in ranks:
                await rank.send(RunFinished(status="stopped", duration_s=1.0), step=8, epoch=4)
            run = await _until(http, "two-stop", lambda r: r["status"] == "stopped", "stopped")
            assert run["status_detail"] is None
            for rank in ranks:
                await rank.send(RunResumed(checkpoint="round-000002", path="p", round=2, checkpoint_step=8,
                                           checkpoint_epoch=4), step=8, epoch=4)
            run = await _until(http, "two-stop", lambda r: r["status"] == "live", "live again")
            assert [r["status"] for r in run["ranks"]] == ["live", "live"]
