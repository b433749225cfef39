"""The supervised loop of every background task: it outlives any failure, backs off, says so once per
outage, and the part is degraded until a turn works again."""

from __future__ import annotations

import asyncio
import logging

import pytest

from nissa_server.health import Health, retry_delay, supervise
from nissa_server.store import UnusableDatabase

pytestmark = pytest.mark.single_backend


async def test_a_task_outlives_its_failures_backs_off_and_says_so_once(caplog):
    caplog.set_level(logging.WARNING, logger="nissa_server.health")
    health = Health(expected=(UnusableDatabase,), clock=lambda: 100.0)
    outcomes = [UnusableDatabase("cannot connect"), UnusableDatabase("cannot connect"), KeyError("a bug"), None, None]
    waits: list[float] = []
    seen: list[dict] = []
    done = asyncio.Event()

    async def step() -> None:
        outcome = outcomes.pop(0)
        seen.append({part: t.failures for part, t in health.degraded.items()})
        if not outcomes:
            done.set()
            await asyncio.Event().wait()  # the server runs on
        if outcome is not None:
            raise outcome

    async def sleep(s: float) -> None:
        waits.append(s)

    task = asyncio.create_task(supervise(health, "maintenance", step, max_retry_s=1.5, sleep=sleep))
    await asyncio.wait_for(done.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert waits == [0.5, 1.0, 1.5]  # doubling, capped
    assert seen == [{}, {"maintenance": 1}, {"maintenance": 2}, {"maintenance": 3}, {}]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [("maintenance degraded: UnusableDatabase: cannot connect (tried again until it works; logged "
                      "again once it does)"), "maintenance works again after 0.0 s and 3 failures"]
    assert caplog.records[0].exc_info is None  # the database's error: no traceback
    assert dict(health.levels()) == {"maintenance": 0.0}


def test_a_bug_is_logged_with_its_traceback_and_the_part_shows_degraded(caplog):
    caplog.set_level(logging.WARNING, logger="nissa_server.health")
    health = Health(expected=(UnusableDatabase,))
    health.watch("alert-sweep")
    try:
        raise KeyError("rule")
    except KeyError as err:
        assert health.failed("alert-sweep", err) == 1
    assert caplog.records[0].exc_info is not None
    assert dict(health.levels()) == {"alert-sweep": 1.0}
    assert health.degraded["alert-sweep"].reason == "KeyError: 'rule'"
    assert retry_delay(1, 30.0) == 0.5 and retry_delay(20, 30.0) == 30.0


async def test_the_store_writer_outlives_a_failure_past_its_commit(tmp_path):
    import asyncio as aio

    from tests.support.stores import started, write_for

    store, (run,) = await started(tmp_path, "published", max_retry_s=0.5)
    try:
        calls: list[int] = []

        def publish(writes) -> None:
            calls.append(len(writes))
            if len(calls) == 1:
                raise RuntimeError("a subscriber's bug")

        store.on_publish = publish
        first = await aio.wait_for(store.submit_and_wait(write_for(run, 2)), 30)  # committed, then publishing failed
        second = await aio.wait_for(store.submit_and_wait(write_for(run, 2, start=3)), 30)  # a writer took it
        assert (first.first_id, second.first_id) == (1, 3) and calls == [1, 1]
        assert not store.health.is_down("writer")
    finally:
        await store.close()
