"""A series of a run with 1,000,000 stored events, downsampled for a chart, against the raw read of the
same events, on SQLite and PostgreSQL side by side in one invocation.

Per backend: a fresh database, one run of ``--events`` ``epoch_completed`` events (one env) written
through the store's writer in batches of 2,000 (as ingest writes them), with the CPU it took per event
(``store_cpu_us_per_event``) and the part of it the writer spent on the events' series points and markers
(``series_cpu_us_per_event``: what charts cost ingest); then, ``--repeats``
times each, (a) the raw read: every stored block of the run fetched (bytes, not decoded), and (b) the
series read: ``epoch_completed.accuracy`` of the run on the step axis, downsampled to ``--points`` points
keeping each bucket's min and max and encoded as the API's JSON reply. Figures are medians.
``ratio=`` is the series read over the raw read on SQLite.

    python bench/series.py [--events 1000000] [--points 2000] [--repeats 5] [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import statistics
import sys
import time

import msgspec

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench.backends import each_database  # noqa: E402
from leyline import encode, make_event
from leyline.codec import decode_frame_wire  # noqa: E402
from leyline.esper import EpochCompleted
from leyline.frames import EventBatch  # noqa: E402
from nissa_server.batches import build_write  # noqa: E402
from nissa_server.routes.common import json_response  # noqa: E402
from nissa_server.series import SeriesReply, shape  # noqa: E402
from nissa_server.store import create_store, series_queries, sql  # noqa: E402

BATCH = 2000
NAME = "epoch_completed.accuracy"


def _batch(run_id: str, start: int, n: int) -> list:
    events = [make_event(EpochCompleted(round=seq // 64, accuracy=0.5 + 0.4 * ((seq * 7919) % 1000) / 1000,
                                        val_loss=1.0 / seq, train_loss=None),
                         run_id=run_id, seq=seq, ts=1.7e9 + seq / 100, step=seq * 16, epoch=seq, env=0)
              for seq in range(start, start + n)]
    return decode_frame_wire(encode(EventBatch(events=events))).events


async def fill(store, n: int) -> tuple[int, float]:
    """Store ``n`` events of one run; returns its run key and the CPU seconds per event it took this
    process (building the writes and the writer's thread; a PostgreSQL server's own CPU not counted)."""
    def claim(conn):
        row = sql.claim_run(conn, "bench-series", "bench", b"x" * 32, live=True, now=time.time())
        sql.take_stream(conn, row.run_key, 0, "bench", time.time() + 3600)
        return row

    row = await store.call(claim)
    run = store.registry.remember(row.run_key, row.run_id, row.name, row.secret_hash)
    began = time.process_time()
    for start in range(1, n + 1, BATCH):
        events = _batch(run.run_id, start, min(BATCH, n + 1 - start))
        write = build_write(run, 0, run.stream(0), events, max_event_bytes=1 << 20, session="bench")[0]
        await store.submit(write)
    await store.call(lambda conn: None)
    while await store.series_pass.once():  # what the series pass has not charted yet
        pass
    return row.run_key, (time.process_time() - began) / n


def raw_read(conn, run_key: int) -> int:
    return sum(len(row[0]) for row in conn.execute("SELECT body FROM event_blocks WHERE run_key = ? ORDER BY id",
                                                   (run_key,)))


def series_bytes(conn, run_key: int) -> int:
    """Bytes of the run's series points as stored (their packed arrays and summaries)."""
    columns = " + ".join(f"COALESCE(LENGTH({c}), 0)" for c in (
        "step", "epoch", "round", "ts", "value", "summary_step", "summary_epoch", "summary_round", "summary_ts",
        "summary_value"))
    return int(conn.execute(f"SELECT SUM({columns}) FROM series_chunks WHERE run_key = ?", (run_key,)).fetchone()[0])


def series_read(conn, run_key: int, points: int) -> bytes:
    data = series_queries.read_series(conn, run_key, NAME, "step", None, points).series
    reply = SeriesReply(name=NAME, x="step", series=shape("bench-series", data, points, 1))
    assert len(reply.series[0].x) <= points
    return json_response(reply).body


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


async def run_backend(db: str, args: argparse.Namespace) -> dict[str, float]:
    store = create_store(db)
    store.open()
    store.start()
    try:
        run_key, writer_s = await fill(store, args.events)
        series_s = (store.series.seconds + store.series_pass.seconds) / args.events
        read = lambda fn, *a: store.read_sync(fn, *a)  # noqa: E731
        raw_bytes = read(raw_read, run_key)
        stored_series = read(series_bytes, run_key)
        raw_ms = median_ms(lambda: read(raw_read, run_key), args.repeats)
        body = read(series_read, run_key, args.points)
        series_ms = median_ms(lambda: read(series_read, run_key, args.points), args.repeats)
    finally:
        await store.close()
    points = len(msgspec.json.decode(body)["series"][0]["x"])
    return {"series_ms": series_ms, "raw_ms": raw_ms, "raw_mb": raw_bytes / 1e6, "points": points,
            "store_us": writer_s * 1e6, "series_write_us": series_s * 1e6,
            "series_bytes": stored_series / args.events, "event_bytes": raw_bytes / args.events}


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backends", default="sqlite,postgresql")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    results: dict[str, dict[str, float]] = {}
    for backend, db in each_database(args.backends):
        results[backend] = r = asyncio.run(run_backend(db, args))
        print(f"{backend:>10}: series of {args.events:,} events -> {r['points']:.0f} points in "
              f"{r['series_ms']:.1f} ms; raw read of the same events {r['raw_ms']:.1f} ms ({r['raw_mb']:.0f} MB); "
              f"stored with {r['store_us']:.1f} us of CPU per event, of which series {r['series_write_us']:.1f} us; "
              f"{r['event_bytes']:.0f} bytes of event JSON and {r['series_bytes']:.0f} of series per event", flush=True)
    pairs = [f"events={args.events}", f"points={args.points}"]
    names = {"sqlite": "", "postgresql": "_pg"}
    for backend, r in results.items():
        tag = names.get(backend, f"_{backend}")
        pairs += [f"series_ms_1m{tag}={r['series_ms']:.2f}", f"raw_read_ms{tag}={r['raw_ms']:.2f}",
                  f"store_cpu_us_per_event{tag}={r['store_us']:.1f}", f"series_cpu_us_per_event{tag}="
                  f"{r['series_write_us']:.1f}", f"series_bytes_per_event{tag}={r['series_bytes']:.0f}"]
    if "sqlite" in results:
        pairs.append(f"ratio={results['sqlite']['series_ms'] / results['sqlite']['raw_ms']:.3f}")
    print(" ".join(pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
