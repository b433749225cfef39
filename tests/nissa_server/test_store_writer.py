"""The store's writer, on both backends: commit sizes, id order, the fence of a stream's session, and
what a failed write does to its stream."""

from __future__ import annotations

import time
from collections import Counter

from leyline import CommandAction, CommandStatus, CommandStatusChanged
from nissa_server.batches import add_server_event
from nissa_server.store import EventWrite, RunGone, StaleWrite, Superseded, queries, sql
from tests.support.stores import failing, settled, started, write_for


async def test_a_backlog_is_committed_in_bounded_transactions(tmp_path):
    # A backlog committed whole would reach every watcher as one burst, bigger than a watcher's room.
    store, (run,) = await started(tmp_path, "backlog", max_rows_per_commit=1000)
    rows_per_commit: Counter[int] = Counter()
    for k in range(10):  # queued without yielding: the writer finds all ten waiting
        write = await store.submit_built(lambda k=k: write_for(run, 400, 1 + 400 * k))
        write.on_stored = lambda _: rows_per_commit.update({store.commits: 400})
    await settled(store)
    await store.close()
    assert sum(rows_per_commit.values()) == 4000
    assert len(rows_per_commit) >= 4 and max(rows_per_commit.values()) <= 1000 + 400


async def test_ids_follow_queue_order_and_publication_follows_ids(tmp_path):
    # Watchers skip what is at or below the last id they sent: published ids must only grow.
    store, (early, late) = await started(tmp_path, "early", "late", queue_batches=1)
    published: list[tuple[str, int, int]] = []
    store.on_publish = lambda ws: published.extend((w.run_id, w.first_id, w.last_id) for w in ws)
    await store.submit_built(lambda: write_for(late, 3))
    await store.submit_built(lambda: write_for(early, 3))
    await settled(store)
    await store.close()
    assert [run_id for run_id, _, _ in published] == ["late", "early"]
    ids = [i for _, first, last in published for i in (first, last)]
    assert ids == [1, 3, 4, 6], published


async def test_the_servers_own_events_take_their_seqs_in_the_transaction(tmp_path):
    # Any server may author a run's events at rank -1: their seqs come from the database, in commit order.
    store, (run,) = await started(tmp_path, "own")
    published: list[int] = []
    store.on_publish = lambda ws: published.extend(row[0] for w in ws for row in w.rows)
    change = CommandStatusChanged(command_id="c1", action=CommandAction.DEBUG, status=CommandStatus.QUEUED)
    writes = [EventWrite(run=run, rank=-1, prepare=lambda conn, w: add_server_event(conn, w, change))
              for _ in range(3)]
    for write in writes:
        await store.submit(write)
    await settled(store)
    await store.close()
    assert published == [1, 2, 3]


async def test_a_session_that_no_longer_holds_its_stream_stores_nothing(tmp_path):
    store, (run,) = await started(tmp_path, "fenced")
    failures: list[BaseException] = []
    first = await store.submit_built(lambda: write_for(run, 3))
    await store.call(lambda conn: sql.take_stream(conn, run.run_key, 0, "another:session", time.time() + 60))
    late = await store.submit_built(lambda: write_for(run, 3, 4))
    late.on_failed = failures.append
    await settled(store)
    stored = await store.read(sql.load_stream, run.run_key, 0)
    await store.close()
    assert first.first_id == 1 and [type(err) for err in failures] == [Superseded]
    assert (stored.contiguous, stored.last_seq) == (3, 3)


async def test_a_failed_write_fails_the_later_writes_of_its_stream_until_it_is_reloaded(tmp_path):
    # Later writes were built on the stream state the failed one claimed: committing them would
    # ack seqs the database lacks, and the trainer would never resend them.
    store, (run,) = await started(tmp_path, "broken")
    published: list[int] = []
    store.on_publish = lambda ws: published.extend(row[0] for w in ws for row in w.rows)
    acks: list[int] = []
    failures: list[BaseException] = []

    def tracked(start: int, fail: bool = False) -> EventWrite:
        write = write_for(run, 3, start)
        write.on_stored, write.on_failed = acks.append, failures.append
        if fail:
            write.prepare = failing(store)
        return write

    await store.submit_built(lambda: tracked(1, fail=True))
    await store.submit_built(lambda: tracked(4))  # same writer batch as the failing one
    await store.call(lambda conn: None)
    await store.submit_built(lambda: tracked(7))  # built after the failure, before a reload
    await settled(store)
    assert published == [] and acks == []
    assert isinstance(failures[0], store.errors)
    assert [type(err) for err in failures[1:]] == [StaleWrite, StaleWrite]
    run.streams[0] = await store.call(lambda conn: sql.load_stream(conn, run.run_key, 0))  # a new session
    assert (run.stream(0).contiguous, run.stream(0).stored) == (0, 0)
    await store.submit_built(lambda: tracked(1))  # what a reconnecting hub resends
    await settled(store)
    await store.close()
    assert published == [1, 2, 3] and acks == [3]


async def test_a_stale_write_failing_leaves_the_reloaded_stream_alone(tmp_path):
    # Its claims were on the state the reload replaced: failing it must not mark the new state broken,
    # nor take down the fresh write queued beside it.
    store, (run,) = await started(tmp_path, "reloaded")
    broken = write_for(run, 3)
    broken.prepare = failing(store)
    await store.submit_built(lambda: broken)
    await store.call(lambda conn: None)
    left_over = write_for(run, 3, 4)  # built on the state the failure left, before the reload
    run.streams[0] = await store.call(lambda conn: sql.load_stream(conn, run.run_key, 0))
    acks: list[int] = []
    failures: list[BaseException] = []
    left_over.on_failed = failures.append
    await store.submit(left_over)
    fresh = await store.submit_built(lambda: write_for(run, 3))
    fresh.on_stored = acks.append
    await settled(store)
    await store.close()
    assert [type(err) for err in failures] == [StaleWrite]
    assert acks == [3] and not run.stream(0).broken


async def test_a_deleted_run_takes_no_more_events(tmp_path):
    store, (run,) = await started(tmp_path, "gone")
    await store.submit_built(lambda: write_for(run, 2, session=None))
    await store.call(lambda conn: conn.execute("DELETE FROM runs WHERE run_key = ?", (run.run_key,)))
    failures: list[BaseException] = []
    late = await store.submit_built(lambda: write_for(run, 2, 3, session=None))
    late.on_failed = failures.append
    await settled(store)
    await store.close()
    assert [type(err) for err in failures] == [RunGone]
    assert str(failures[0]) == "run 'gone' was deleted on this server: start a new run"


async def test_close_commits_what_is_queued(tmp_path):
    store, (run,) = await started(tmp_path, "drain")
    for k in range(5):
        await store.submit_built(lambda k=k: write_for(run, 10, 1 + 10 * k))
    await store.close()
    reopened, _ = await started(tmp_path)
    stream = await reopened.read(sql.load_stream, run.run_key, 0)
    await reopened.close()
    assert stream.contiguous == 50


async def test_a_read_in_the_writers_transaction_sees_the_writes_queued_before_it(tmp_path):
    # The check of re-sent seqs reads through the writer: queued behind a write, it must see its rows
    # even when both ride in one transaction.
    store, (run,) = await started(tmp_path, "same", commit_interval_s=0.2)
    await store.call(lambda conn: None)  # the next transaction waits out the interval: both join it
    await store.submit_built(lambda: write_for(run, 4))
    seen = await store.call(lambda conn: queries.bodies(conn, run.run_key, 0, 1, 4))
    await store.close()
    assert [seq for seq, _ in seen] == [1, 2, 3, 4]


async def test_what_is_acked_is_committed_before_it_is_published(tmp_path):
    # A watcher's seam is what is committed: on PostgreSQL an acked event reaches this server's watchers
    # only once its notification comes back, and a cursor past the end must already be past it.
    store, (run,) = await started(tmp_path, "acked")
    write = await store.submit_and_wait(write_for(run, 3))
    assert await store.committed_upto() >= write.last_id == 3
    await settled(store)
    assert await store.committed_upto() == store.published_upto == 3
    await store.close()
