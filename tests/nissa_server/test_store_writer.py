"""The store's writer: commit sizes, id order, and what a failed write does to its stream."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import Counter

from leyline import encode
from leyline.codec import decode_frame_wire
from leyline.frames import EventBatch
from nissa_server import writes
from nissa_server.batches import build_write, server_event
from nissa_server.runs import RunState
from nissa_server.store import EventWrite, StaleWrite, Store
from tests.support import events_for


def write_for(run: RunState, n: int, start: int = 1) -> EventWrite:
    batch = decode_frame_wire(encode(EventBatch(events=events_for(run.run_id, n, start_seq=start))))
    return build_write(run, 0, batch.events, max_event_bytes=1 << 20)[0]


async def started(path, *runs: str, **kw) -> tuple[Store, list[RunState]]:
    store = Store(path, **kw)
    store.open()
    store.start()
    states = [store.registry.create(run_id, "") for run_id in runs]
    for run in states:
        await store.call(lambda conn, run=run: writes.insert_run(conn, run))
    return store, states


async def slot_race(store: Store, resumes_first, waits_for_room) -> None:
    """With a one-slot queue: ``waits_for_room`` submits while the queue is full; ``resumes_first``
    submits as soon as a slow call returns, in the same writer step that frees the slot."""

    async def after_a_slow_call():
        await store.call(lambda conn: time.sleep(0.2))
        await resumes_first()

    async def while_full():
        await asyncio.sleep(0.05)
        await waits_for_room()

    async def filler():
        await asyncio.sleep(0.02)
        await store.call(lambda conn: None)

    await asyncio.gather(after_a_slow_call(), while_full(), filler())
    await store.call(lambda conn: None)


async def test_a_backlog_is_committed_in_bounded_transactions(tmp_path):
    # A backlog committed whole would reach every watcher as one burst, bigger than a watcher's room.
    store, (run,) = await started(tmp_path / "n.db", "backlog", max_rows_per_commit=1000)
    rows_per_commit: Counter[int] = Counter()
    store.on_publish = lambda write: rows_per_commit.update({store.commits: len(write.rows)})
    for k in range(10):  # queued without yielding: the writer finds all ten waiting
        await store.submit_built(lambda k=k: write_for(run, 400, 1 + 400 * k))
    await store.call(lambda conn: None)  # settles after every write queued before it
    await store.close()
    assert sum(rows_per_commit.values()) == 4000
    assert len(rows_per_commit) >= 4 and max(rows_per_commit.values()) <= 1000 + 400


async def test_ids_follow_queue_order_even_when_a_write_built_first_is_queued_last(tmp_path):
    # Watchers skip what is at or below the last id they sent: committed ids must only grow.
    store, (early, late) = await started(tmp_path / "n.db", "early", "late", queue_batches=1)
    published: list[tuple[str, int, int]] = []
    store.on_publish = lambda w: published.append((w.run.run_id, w.first_id, w.last_id))

    await slot_race(store, lambda: store.submit(write_for(late, 3)), lambda: store.submit(write_for(early, 3)))
    await store.close()
    assert [run_id for run_id, _, _ in published] == ["late", "early"], "the race did not happen"
    ids = [i for _, first, last in published for i in (first, last)]
    assert ids == [1, 3, 4, 6], published


async def test_writes_of_one_stream_reach_the_writer_in_the_order_they_were_built(tmp_path):
    # Two server events of one run: seq order must be commit order, or the stream's stored state
    # would run ahead of what the file holds (and go back when the other one lands).
    from leyline import Heartbeat

    store, (run,) = await started(tmp_path / "n.db", "cmds", queue_batches=1)
    published: list[int] = []
    store.on_publish = lambda w: published.extend(row[2] for row in w.rows)

    def event() -> EventWrite:
        return server_event(run, Heartbeat(uptime_s=1.0))

    await slot_race(store, lambda: store.submit_built(event), lambda: store.submit_built(event))
    await store.close()
    assert published == [1, 2]


async def test_a_failed_write_fails_the_later_writes_of_its_stream_until_it_is_reloaded(tmp_path):
    # Later writes were built on the stream state the failed one claimed: committing them would
    # ack seqs the file lacks, and the trainer would never resend them.
    store, (run,) = await started(tmp_path / "n.db", "broken")
    published: list[int] = []
    store.on_publish = lambda w: published.extend(row[2] for row in w.rows)
    acks: list[int] = []
    failures: list[BaseException] = []

    def tracked(start: int, fail: bool = False) -> EventWrite:
        write = write_for(run, 3, start)
        write.on_stored, write.on_failed = acks.append, failures.append
        if fail:
            write.before = lambda conn: (_ for _ in ()).throw(sqlite3.OperationalError("disk I/O error"))
        return write

    await store.submit_built(lambda: tracked(1, fail=True))
    await store.submit_built(lambda: tracked(4))  # same writer batch as the failing one
    await store.call(lambda conn: None)
    await store.submit_built(lambda: tracked(7))  # built after the failure, before a reload
    await store.call(lambda conn: None)
    assert published == [] and acks == []
    assert isinstance(failures[0], sqlite3.OperationalError)
    assert [type(err) for err in failures[1:]] == [StaleWrite, StaleWrite]
    await store.resync(run, 0)
    assert (run.stream(0).contiguous, run.stream(0).stored) == (0, 0)
    await store.submit_built(lambda: tracked(1))  # what a reconnecting hub resends
    await store.call(lambda conn: None)
    await store.close()
    assert published == [1, 2, 3] and acks == [3]


async def test_a_stale_write_failing_leaves_the_reloaded_stream_alone(tmp_path):
    # Its claims were on the state the reload replaced: failing it must not mark the new state dirty,
    # nor take down the fresh write queued beside it.
    store, (run,) = await started(tmp_path / "n.db", "reloaded")
    failing = write_for(run, 3)
    failing.before = lambda conn: (_ for _ in ()).throw(sqlite3.OperationalError("disk I/O error"))
    await store.submit_built(lambda: failing)
    await store.call(lambda conn: None)
    left_over = write_for(run, 3, 4)  # built on the state the failure left, before the reload
    await store.resync(run, 0)
    acks: list[int] = []
    failures: list[BaseException] = []
    left_over.on_failed = failures.append
    await store.submit(left_over)
    fresh = await store.submit_built(lambda: write_for(run, 3))
    fresh.on_stored = acks.append
    await store.call(lambda conn: None)
    await store.close()
    assert [type(err) for err in failures] == [StaleWrite]
    assert acks == [3] and not run.dirty
