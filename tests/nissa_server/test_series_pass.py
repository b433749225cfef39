"""The series pass, on both backends: charts are exact before and after each pass (a read adds the events
past the watermark), a restart goes on from the watermark, a database from before the pass keeps its
charts, and servers sharing a database chart each event once."""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest

from leyline import EventKind, Metrics, encode, make_event
from leyline.codec import decode_frame_wire
from leyline.esper import EsperKind
from leyline.frames import EventBatch
from leyline.series import points_of
from nissa_server import cli
from nissa_server.batches import build_write
from nissa_server.runs import RunState
from nissa_server.settings import Settings
from nissa_server.store import series_pass, series_queries, series_sql
from nissa_server.store.series_gather import Charted
from nissa_server.store.series_sql import MERGE_AT
from tests.support.clients import events_for
from tests.support.databases import database_for, side_connection
from tests.support.stores import settled, started
from tests.support.waiting import async_wait_for

KINDS = (EsperKind.EPOCH_COMPLETED, EsperKind.PPO_UPDATE, EsperKind.SEED_FOSSILIZED, EventKind.METRICS,
         EventKind.DEBUG_LAYER_STATS, EventKind.HEARTBEAT)
NEVER = 3600.0
"""A pass interval no test reaches: passes run when the test says."""


def _write(run, events):
    batch = decode_frame_wire(encode(EventBatch(events=events)))
    return build_write(run, 0, run.stream(0), batch.events, max_event_bytes=1 << 20, session="test:session")[0]


def _expected(events) -> dict[str, tuple[list[float], list[float]]]:
    out: dict[str, tuple[list[float], list[float]]] = {}
    for event in events:
        for p in points_of(event):
            xs, ys = out.setdefault(p.key, ([], []))
            xs.append(float(p.step))
            ys.append(p.value)
    return out


async def _charts(store, run) -> tuple[dict, list]:
    """Every series of the run on the step axis, as reads return them, and its markers."""
    listing = await store.read(series_queries.list_series, run.run_key, None, 100_000)
    got: dict[str, tuple[list[float], list[float]]] = {}
    for name in sorted({name for _, name, _ in listing}):
        for data in (await store.read(series_queries.read_series, run.run_key, name, "step", None)).series:
            got[data.key] = (data.x.tolist(), data.y.tolist())
    assert {key: n for key, _, n in listing} == {key: len(x) for key, (x, _) in got.items()}
    markers = await store.read(series_queries.read_markers, run.run_key, "step", None, 100_000)
    return got, markers


async def _submit(store, run, events) -> None:
    await store.submit_built(lambda: _write(run, events))
    await settled(store)


async def test_charts_are_exact_before_and_after_every_pass_and_rows_merge_in_order(tmp_path):
    store, (run,) = await started(tmp_path, "pass", series_interval_s=NEVER)
    written: list = []
    markers_seen = None
    for k in range(2 * MERGE_AT + 3):
        events = events_for(run.run_id, 3, start_seq=1 + 3 * k, kinds=KINDS)
        await _submit(store, run, events)
        written += events
        before, markers = await _charts(store, run)
        assert before == _expected(written), f"the events past the watermark, at write {k}"
        if k % 3 != 2:  # now and then two writes in one pass
            assert store.series_pass.waiting == (6 if k % 3 == 0 and k else 3)
            assert await store.series_pass.once() is False
            assert store.series_pass.waiting == 0
            await store.series_pass.merge_due()
            after, markers_after = await _charts(store, run)
            assert after == before and markers_after == markers
        markers_seen = markers
    assert markers_seen, "fossilized seeds are markers"
    levels = await store.read(lambda conn: conn.execute(
        "SELECT MAX(level), COUNT(*) FROM series_chunks WHERE run_key = ?", (run.run_key,)).fetchone())
    mark = await store.read(series_sql.watermark)
    await store.close()
    assert store.series_pass.gathered_again == 0, "every event was gathered as it committed"
    assert levels[0] >= 1, "rows of level 0 were merged"
    assert mark == store.published_upto, "the last write had its pass"


async def test_a_restart_goes_on_from_the_watermark(tmp_path, monkeypatch):
    store, (run,) = await started(tmp_path, "restart", series_interval_s=NEVER)
    first = events_for(run.run_id, 20, kinds=KINDS)
    await _submit(store, run, first)
    await store.series_pass.once()
    later = events_for(run.run_id, 20, start_seq=21, kinds=KINDS)
    await _submit(store, run, later)
    charted = await store.read(series_sql.watermark)

    async def killed() -> bool:  # as after kill -9: the pass at shutdown never runs
        return False

    monkeypatch.setattr(store.series_pass, "once", killed)
    await store.close()

    again, _ = await started(tmp_path, series_interval_s=NEVER)
    state = again.registry.remember(run.run_key, run.run_id, run.name, run.secret_hash)
    assert await again.read(series_sql.watermark) == charted < again.published_upto
    before, markers = await _charts(again, state)
    assert before == _expected(first + later)
    assert await again.series_pass.once() is False
    assert again.series_pass.gathered_again == 20, "the events before the restart were read back"
    assert await again.read(series_sql.watermark) == again.published_upto
    assert await _charts(again, state) == (before, markers)
    await again.close()


async def test_closing_charts_what_is_committed(tmp_path):
    store, (run,) = await started(tmp_path, "closing", series_interval_s=NEVER)
    await _submit(store, run, events_for(run.run_id, 10, kinds=KINDS))
    await store.close()
    again, _ = await started(tmp_path, series_interval_s=NEVER)
    assert await again.read(series_sql.watermark) == again.published_upto == 10
    await again.close()


async def test_the_pass_runs_by_itself(tmp_path):
    store, (run,) = await started(tmp_path, "timer", series_interval_s=0.05)
    await _submit(store, run, events_for(run.run_id, 10, kinds=KINDS))

    async def charted() -> bool:
        return await store.read(series_sql.watermark) == 10

    await async_wait_for(charted, message="the pass charted the events")
    await store.close()


async def test_a_database_from_before_the_pass_keeps_its_charts_once(tmp_path):
    store, (run,) = await started(tmp_path, "old", series_interval_s=NEVER)
    events = events_for(run.run_id, 30, kinds=KINDS)
    await _submit(store, run, events)
    await store.close()  # charted: as the version before charted each commit
    side = side_connection(Settings(**database_for(tmp_path)))
    try:
        side.execute("DROP TABLE series_progress")
    finally:
        side.close()
    again, _ = await started(tmp_path, series_interval_s=NEVER)
    state = again.registry.remember(run.run_key, run.run_id, run.name, run.secret_hash)
    assert await again.read(series_sql.watermark) == 30
    assert (await _charts(again, state))[0] == _expected(events), "not charted twice"
    await again.close()


async def test_a_pass_whose_watermark_moved_or_whose_run_is_gone_writes_nothing(tmp_path):
    store, (run,) = await started(tmp_path, "moved", series_interval_s=NEVER)
    await _submit(store, run, events_for(run.run_id, 5, kinds=KINDS))
    stale = store.series.rows_of(Charted(series={(run.run_key, "x"): ("x", [np.zeros(1)] * 5)}))
    assert await store.call(lambda conn: store.series.write_pass(conn, mark=3, end=5, rows=stale)) is False
    gone = store.series.rows_of(Charted(series={(run.run_key + 1000, "x"): ("x", [np.zeros(1)] * 5)}))
    assert await store.call(lambda conn: store.series.write_pass(conn, mark=0, end=5, rows=gone)) is True
    rows = await store.read(lambda conn: conn.execute("SELECT COUNT(*) FROM series_chunks").fetchone()[0])
    await store.close()
    assert rows == 0


@pytest.mark.postgresql_only
async def test_servers_sharing_a_database_chart_each_event_once(tmp_path):
    url = database_for(tmp_path)["db_url"]
    one, (a,) = await started(tmp_path, "a", url=url, series_interval_s=NEVER)
    two, (b,) = await started(tmp_path, "b", url=url, series_interval_s=NEVER)
    written = {a.run_id: [], b.run_id: []}
    for k in range(6):
        for store, run in ((one, a), (two, b), (two, b)):
            events = events_for(run.run_id, 4, start_seq=1 + len(written[run.run_id]), kinds=KINDS)
            await _submit(store, run, events)
            written[run.run_id] += events
        await settled(one)
        await settled(two)
        await (one if k % 2 else two).series_pass.once()  # each pass charts the other server's events too
    for store in (one, two):
        for run in (a, b):
            state = store.registry.get(run.run_id) or store.registry.remember(
                run.run_key, run.run_id, run.name, run.secret_hash)
            assert (await _charts(store, state))[0] == _expected(written[run.run_id])
    counts = await one.read(lambda conn: conn.execute("SELECT SUM(n) FROM series_chunks").fetchone()[0])
    await one.close()
    await two.close()
    assert counts == sum(len(x) for run in (a, b) for x, _ in _expected(written[run.run_id]).values())


async def test_a_failed_pass_charts_its_events_with_the_next(tmp_path, monkeypatch):
    store, (run,) = await started(tmp_path, "failed", series_interval_s=NEVER)
    written = events_for(run.run_id, 12, kinds=KINDS)
    await _submit(store, run, written[:6])
    real = store.series.write_pass

    def broken(conn, **kw):
        raise store.errors[0]("disk I/O error")

    monkeypatch.setattr(store.series, "write_pass", broken)
    with pytest.raises(store.errors[0]):
        await store.series_pass.once()
    monkeypatch.setattr(store.series, "write_pass", real)
    await _submit(store, run, written[6:])
    assert await store.series_pass.once() is False
    assert await store.read(series_sql.watermark) == 12
    charts, _ = await _charts(store, run)
    await store.close()
    assert charts == _expected(written) and store.series_pass.gathered_again == 0


async def test_a_backlog_is_charted_a_pass_at_a_time_while_new_events_are_gathered_once(tmp_path, monkeypatch):
    store, (run,) = await started(tmp_path, "backlog", series_interval_s=NEVER)
    written = events_for(run.run_id, 30, kinds=KINDS)
    for at in range(0, 20, 5):
        await _submit(store, run, written[at:at + 5])

    async def killed() -> bool:
        return False

    monkeypatch.setattr(store.series_pass, "once", killed)
    await store.close()
    monkeypatch.setattr(series_pass, "PASS_EVENTS", 6)
    again, _ = await started(tmp_path, series_interval_s=NEVER)
    state = again.registry.remember(run.run_key, run.run_id, run.name, run.secret_hash)
    for at in range(20, 30, 5):
        await _submit(again, state, written[at:at + 5])
    marks = []
    while await again.series_pass.once():
        marks.append(await again.read(series_sql.watermark))
    charts, _ = await _charts(again, state)
    await again.close()
    assert marks == [10, 20] and charts == _expected(written)
    assert again.series_pass.gathered_again == 20, "only the backlog was read back; the new events were gathered once"


@pytest.mark.single_backend  # no database
def test_a_write_keeps_its_decoded_payloads_only_where_they_are_what_is_stored():
    # The pass charts a write from its payloads as ingest decoded them: only where the stored JSON says
    # the same (a NUL is stored as U+FFFD, which a series key must show) and every event is new.
    def built(run, events):
        payloads: list = []
        frame = decode_frame_wire(encode(EventBatch(events=events)), payloads)
        return build_write(run, 0, run.stream(0), frame.events, max_event_bytes=1 << 20, session=None,
                           payloads=payloads)[0]

    run = RunState(run_key=1, run_id="d", name="", secret_hash=b"x" * 32)
    plain = [make_event(Metrics(values={"loss": 1.0}, labels={"split": "a"}), run_id="d", seq=s, ts=1.0)
             for s in (1, 2)]
    assert [p for _, p in built(run, plain).decoded] == [e.payload for e in plain]
    assert built(run, plain).decoded is None, "repeats: only some events are new"
    nul = make_event(Metrics(values={"loss": 1.0}, labels={"split": "a\x00b"}), run_id="d", seq=3, ts=1.0)
    assert built(run, [nul]).decoded is None


async def test_prune_charts_what_a_stopped_server_left_before_it_thins(tmp_path, monkeypatch):
    store, (run,) = await started(tmp_path, "pruned", series_interval_s=NEVER)
    await _submit(store, run, events_for(run.run_id, 12, kinds=KINDS))

    async def killed() -> bool:
        return False

    monkeypatch.setattr(store.series_pass, "once", killed)
    await store.close()
    settings = Settings(**database_for(tmp_path))
    code = await asyncio.to_thread(cli.main, ["prune", "--older-than", "0s", "--db",
                                              settings.db_url or str(settings.db_path)])
    again, _ = await started(tmp_path, series_interval_s=NEVER)
    mark = await again.read(series_sql.watermark)
    await again.close()
    assert code == 0 and mark == 12


async def test_a_column_of_one_value_is_kept_once_and_read_back_whole_on_every_axis(tmp_path, monkeypatch):
    # Epoch and loss hold one value in every pass, round none (NaN) and step a new one per event: each row
    # keeps the first three as one value. Every axis reads back whole, through merges and summaries.
    monkeypatch.setattr(series_sql, "SUMMARY_MIN", 4 * series_sql.SUMMARY_BLOCK)
    store, (run,) = await started(tmp_path, "packed", series_interval_s=NEVER)
    per_pass = 5 * series_sql.SUMMARY_BLOCK
    events = [make_event(Metrics(values={"loss": 0.5}), run_id=run.run_id, seq=s, ts=1.7e9 + s / 8, step=3 * s,
                         epoch=(s - 1) // per_pass) for s in range(1, MERGE_AT * per_pass + 1)]
    for at in range(0, len(events), per_pass):
        await _submit(store, run, events[at:at + per_pass])
        await store.series_pass.once()
    sizes = await store.read(lambda conn: conn.execute(
        "SELECT level, n, LENGTH(step), LENGTH(epoch), LENGTH(round), LENGTH(value), LENGTH(summary_epoch) "
        "FROM series_chunks WHERE run_key = ? ORDER BY id", (run.run_key,)).fetchall())
    assert [tuple(r[2:6]) for r in sizes] == [(8 * per_pass, 8, 8, 8)] * MERGE_AT
    await store.series_pass.merge_due()
    merged = await store.read(lambda conn: conn.execute(
        "SELECT level, n, LENGTH(epoch), LENGTH(round), LENGTH(value), summary_n, LENGTH(summary_round) "
        "FROM series_chunks WHERE run_key = ?", (run.run_key,)).fetchall())
    n = len(events)
    assert [tuple(r) for r in merged] == [(1, n, 8 * n, 8, 8, merged[0][5], 8)], "epochs differ; round and loss do not"
    want = {"step": [3.0 * s for s in range(1, n + 1)], "epoch": [float((s - 1) // per_pass) for s in range(1, n + 1)],
            "ts": [1.7e9 + s / 8 for s in range(1, n + 1)]}
    for axis, xs in want.items():
        (data,) = (await store.read(series_queries.read_series, run.run_key, "loss", axis, None)).series
        assert data.x.tolist() == xs and data.y.tolist() == [0.5] * n, axis
    (short,) = (await store.read(series_queries.read_series, run.run_key, "loss", "epoch", None, 1)).series
    assert len(short.x) == merged[0][5] < n and set(short.y.tolist()) == {0.5}, "the summary, unpacked"
    await store.close()


@pytest.mark.postgresql_only
async def test_connections_the_database_closed_while_idle_are_made_anew_not_failed_on(tmp_path, caplog):
    """A restarting database closes every connection it holds: the writer's and the pass's, idle then, are
    found closed before they are used, so the first write and pass after it work and nothing is degraded."""
    caplog.set_level(logging.WARNING, logger="nissa_server.health")
    settings = Settings(**database_for(tmp_path))
    store, (run,) = await started(tmp_path, "idle", series_interval_s=NEVER)
    written = events_for(run.run_id, 12, kinds=KINDS)
    await _submit(store, run, written[:6])
    await store.series_pass.once()
    side = side_connection(settings)
    try:  # every connection of the store but its listener's, as a restart would (its own tested elsewhere)
        closed = side.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND query NOT LIKE 'LISTEN%'"
        ).fetchall()
    finally:
        side.close()
    assert len(closed) >= 2 and all(ok for (ok,) in closed)  # at least the writer's and the pass's
    await _submit(store, run, written[6:])  # stored: its events are charted below
    await store.series_pass.once()
    charts, _ = await _charts(store, run)
    await store.close()
    assert charts == _expected(written)
    assert [r.getMessage() for r in caplog.records if "degraded" in r.getMessage()] == []
