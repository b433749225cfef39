"""A pass of many series, written a part a transaction (``series_split``), on both backends: other runs' events are
stored and charted between its parts, a read in the middle is exact, and a pass stopped halfway (as by kill -9) is
finished by the next start, each series written once."""

from __future__ import annotations

import asyncio
import time

from leyline import Metrics, make_event
from nissa_server import cli
from nissa_server.settings import Settings
from nissa_server.store import series_queries, series_split, series_sql, summaries_sql
from nissa_server.store.series_gather import chart
from nissa_server.store.series_sql import SeriesWriter
from tests.nissa_server.test_series_pass import NEVER, _charts, _expected, _submit, _write
from tests.support.databases import database_for
from tests.support.stores import settled, started

NAMES = 45
PER_PART = 10


def _wide(run_id: str, rounds: int = 2) -> list:
    """Events of ``NAMES`` metric names, 15 a event, each name logged ``rounds`` times."""
    return [make_event(Metrics(values={f"w.{i:03d}": float(r * 100 + i) for i in range(at, at + 15)}),
                       run_id=run_id, seq=1 + r * 3 + k, ts=1.7e9 + r, step=r)
            for r in range(rounds) for k, at in enumerate(range(0, NAMES, 15))]


async def _summaries(store, run) -> dict:
    found = await store.read(summaries_sql.read, [run.run_key])
    return {key: (s.count, s.last) for key, s in found[run.run_key].items()}


async def _points(store) -> int:
    return await store.read(lambda conn: int(conn.execute("SELECT SUM(n) FROM series_chunks").fetchone()[0] or 0))


async def test_a_wide_pass_is_written_in_parts_with_another_runs_events_stored_and_charted_between(tmp_path,
                                                                                               monkeypatch):
    store, (wide, other) = await started(tmp_path, "wide", "other", series_interval_s=NEVER)
    store.series_per_part = PER_PART
    events = _wide(wide.run_id)
    await _submit(store, wide, events)
    real, parts, seen = store.series_call, [], []

    async def series_call(fn):
        result = await real(fn)
        rows = getattr(fn, "keywords", {}).get("rows")
        if rows is not None:
            parts.append(len(rows.chunks))
            if not fn.keywords["last"]:  # the writer is free: another run's events go in, and are charted
                logged = make_event(Metrics(values={"loss": float(len(parts))}), run_id=other.run_id,
                                    seq=len(parts), ts=1.7e9, step=len(parts))
                await store.submit_built(lambda: _write(other, [logged]))
                await settled(store)
                seen.append((await _charts(store, other))[0]["loss{rank=0}"][1])
                assert (await _charts(store, wide))[0] == _expected(events), "the wide run, read halfway"
                assert await store.read(series_sql.watermark) < store.published_upto
        return result

    monkeypatch.setattr(store, "series_call", series_call)
    assert await store.series_pass.once() is False
    monkeypatch.setattr(store, "series_call", real)
    assert parts == [PER_PART] * 4 + [NAMES - 4 * PER_PART], "a transaction a part"
    assert seen == [[1.0], [1.0, 2.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]]
    assert (await _charts(store, wide))[0] == _expected(events)
    assert await store.read(series_split.pending_end) == 0
    assert await store.read(lambda conn: conn.execute("SELECT COUNT(*) FROM series_pending").fetchone()[0]) == 0
    summaries = await _summaries(store, wide)
    await store.close()
    assert summaries == {f"w.{i:03d}{{rank=0}}": (2, float(100 + i)) for i in range(NAMES)}


async def test_a_pass_stopped_between_its_parts_is_finished_by_the_next_start_each_series_once(tmp_path,
                                                                                              monkeypatch):
    store, (wide,) = await started(tmp_path, "wide", series_interval_s=NEVER)
    store.series_per_part = PER_PART
    events = _wide(wide.run_id)
    await _submit(store, wide, events[:3])
    await store.series_pass.once()  # a first round charted: the halfway pass adds to rows and summaries
    await _submit(store, wide, events[3:])
    real, written = store.series_call, []

    async def dies(fn):
        if len(written) == 2:
            raise SystemExit("killed")  # as kill -9: nothing more is written, and no pass runs at shutdown
        written.append(fn)
        return await real(fn)

    monkeypatch.setattr(store, "series_call", dies)
    try:
        await store.series_pass.once()
    except SystemExit:
        pass
    halfway = await _charts(store, wide)
    assert halfway[0] == _expected(events), "read with two parts written"

    async def killed() -> bool:
        return False

    monkeypatch.setattr(store.series_pass, "once", killed)
    await store.close()
    again, _ = await started(tmp_path, series_interval_s=NEVER)
    again.series_per_part = PER_PART
    state = again.registry.remember(wide.run_key, wide.run_id, wide.name, wide.secret_hash)
    assert await again.read(series_split.pending_end) > await again.read(series_sql.watermark)
    assert (await _charts(again, state))[0] == _expected(events), "read after the restart, the pass unfinished"
    assert await again.series_pass.once() is False, "left to the writer that began it, while it may go on"
    assert await again.read(series_split.pending_end) > 0
    again.series.clock = lambda: time.time() + series_split.STALE_S  # no part written since for that long
    while await again.series_pass.once():
        pass
    assert await again.read(series_split.pending_end) == 0
    assert (await _charts(again, state))[0] == _expected(events)
    points, summaries = await _points(again), await _summaries(again, state)
    listing = await again.read(series_queries.list_series, state.run_key, None, 1000)
    await again.close()
    assert points == 2 * NAMES, "each point stored once"
    assert summaries == {f"w.{i:03d}{{rank=0}}": (2, float(100 + i)) for i in range(NAMES)}
    assert sorted(n for _, _, n in listing) == [2] * NAMES


async def test_a_writer_whose_pass_was_taken_over_writes_no_more_of_it(tmp_path):
    store, (run,) = await started(tmp_path, "taken", series_interval_s=NEVER)
    await _submit(store, run, _wide(run.run_id, rounds=1))
    blocks = await store.read(lambda conn: conn.execute("SELECT id, body FROM event_blocks WHERE run_key = ?",
                                                        (run.run_key,)).fetchall())
    charted = chart((run.run_key, int(first_id), bytes(body)) for first_id, body in blocks)
    first, second = SeriesWriter(), SeriesWriter()  # two servers' writers on one database
    parts: dict = {first: [], second: []}
    for writer, out in parts.items():
        for _ in writer.rows_steps(charted, out, per_part=PER_PART):
            pass
    mark, end = await store.read(series_sql.watermark), store.published_upto

    def part(writer, i, again=False):
        rows = parts[writer][i]
        return store.call(lambda conn: writer.write_pass(conn, mark, end, rows, last=i == len(parts[writer]) - 1,
                                                         again=again))

    assert await part(first, 0) and await part(first, 1)
    assert await part(second, 0, again=True), "taken over (its series written already: left out)"
    assert not await part(first, 2), "the first writer's next part is refused"
    for i in range(1, len(parts[second])):
        assert await part(second, i, again=True)
    points, summaries = await _points(store), await _summaries(store, run)
    await store.close()
    assert points == NAMES
    assert summaries == {f"w.{i:03d}{{rank=0}}": (1, float(i)) for i in range(NAMES)}


async def _begun_elsewhere(store, run) -> tuple[SeriesWriter, list, int, int]:
    """A pass in parts begun by another server's writer (its first part written), on ``store``'s database."""
    await _submit(store, run, _wide(run.run_id, rounds=1))
    blocks = await store.read(lambda conn: conn.execute("SELECT id, body FROM event_blocks WHERE run_key = ?",
                                                        (run.run_key,)).fetchall())
    charted = chart((run.run_key, int(first_id), bytes(body)) for first_id, body in blocks)
    other, parts = SeriesWriter(), []
    for _ in other.rows_steps(charted, parts, per_part=PER_PART):
        pass
    mark, end = await store.read(series_sql.watermark), store.published_upto
    assert await store.call(lambda conn: other.write_pass(conn, mark, end, parts[0], last=False))
    return other, parts, mark, end


async def test_a_server_whose_clock_is_ahead_does_not_take_over_a_live_pass_in_parts(tmp_path):
    store, (run,) = await started(tmp_path, "skewed", series_interval_s=NEVER)
    store.series_per_part = PER_PART
    other, parts, mark, end = await _begun_elsewhere(store, run)
    store.series.clock = lambda: time.time() + 3600  # this server's clock an hour ahead of the other's
    assert await store.series_pass.once() is False, "its writer's last part is new to this server: left to it"
    assert (await store.read(series_split.state))[1] == other.token
    for i in range(1, len(parts)):  # the other server goes on, and ends its pass
        assert await store.call(lambda conn, i=i: other.write_pass(conn, mark, end, parts[i],
                                                                     last=i == len(parts) - 1))
    points, pending = await _points(store), await store.read(series_split.pending_end)
    await store.close()
    assert points == NAMES and pending == 0


async def test_a_take_over_is_refused_when_the_writer_wrote_a_part_after_it_was_seen_idle(tmp_path, monkeypatch):
    store, (run,) = await started(tmp_path, "raced", series_interval_s=NEVER)
    store.series_per_part = PER_PART
    other, parts, mark, end = await _begun_elsewhere(store, run)
    store.series_pass.take_over_after_s = 0  # seen idle at once: this server decides to take it over
    real = store.series_call

    async def raced(fn):  # ...and the other server writes its next part before this one's first part runs
        monkeypatch.setattr(store, "series_call", real)
        assert await store.call(lambda conn: other.write_pass(conn, mark, end, parts[1], last=False))
        return await real(fn)

    monkeypatch.setattr(store, "series_call", raced)
    await store.series_pass.once()
    owner = (await store.read(series_split.state))[1]
    assert owner == other.token, "refused: the pass is still its writer's"
    for i in range(2, len(parts)):
        assert await store.call(lambda conn, i=i: other.write_pass(conn, mark, end, parts[i],
                                                                     last=i == len(parts) - 1))
    points, summaries = await _points(store), await _summaries(store, run)
    await store.close()
    assert points == NAMES
    assert summaries == {f"w.{i:03d}{{rank=0}}": (1, float(i)) for i in range(NAMES)}


async def test_prune_finishes_a_pass_a_server_left_halfway_before_it_thins(tmp_path):
    store, (wide,) = await started(tmp_path, "wide", series_interval_s=NEVER)
    store.series_per_part = PER_PART
    events = _wide(wide.run_id)
    await _submit(store, wide, events)
    real, written = store.series_call, []

    async def dies(fn):
        if len(written) == 2:
            raise SystemExit("killed")
        written.append(fn)
        return await real(fn)

    store.series_call = dies
    try:
        await store.series_pass.once()
    except SystemExit:
        pass

    async def killed() -> bool:
        return False

    store.series_pass.once = killed
    await store.close()
    settings = Settings(**database_for(tmp_path))
    code = await asyncio.to_thread(cli.main, ["prune", "--older-than", "0s", "--db",
                                              settings.db_url or str(settings.db_path)])
    again, _ = await started(tmp_path, series_interval_s=NEVER)
    state = again.registry.remember(wide.run_key, wide.run_id, wide.name, wide.secret_hash)
    mark, pending = await again.read(series_sql.watermark), await again.read(series_split.pending_end)
    charts, points = (await _charts(again, state))[0], await _points(again)
    await again.close()
    assert code == 0 and pending == 0 and mark == len(events)
    assert charts == _expected(events) and points == 2 * NAMES, "charted whole and once, then thinned"


async def test_a_pass_in_parts_whose_end_the_watermark_passed_stops_no_later_pass(tmp_path):
    """A server that knows no parts (an older one on the same database) charts past a pass in parts: the
    leftover marker is cleared by the next pass instead of refusing every pass from then on."""
    store, (run,) = await started(tmp_path, "passed", series_interval_s=NEVER)
    await _submit(store, run, _wide(run.run_id, rounds=1))
    blocks = await store.read(lambda conn: conn.execute("SELECT id, body FROM event_blocks WHERE run_key = ?",
                                                        (run.run_key,)).fetchall())
    charted = chart((run.run_key, int(first_id), bytes(body)) for first_id, body in blocks)
    writer, parts = SeriesWriter(), []
    for _ in writer.rows_steps(charted, parts, per_part=PER_PART):
        pass
    mark, end = await store.read(series_sql.watermark), store.published_upto
    assert await store.call(lambda conn: writer.write_pass(conn, mark, end, parts[0], last=False))
    await store.call(lambda conn: conn.execute("UPDATE series_progress SET upto = ? WHERE id = 1", (end,)))
    await _submit(store, run, _wide(run.run_id, rounds=2)[3:4])
    for _ in range(3):
        await store.series_pass.once()
    try:
        assert await store.read(series_sql.watermark) == store.published_upto
        assert await store.read(series_split.pending_end) == 0
    finally:
        await store.close()
