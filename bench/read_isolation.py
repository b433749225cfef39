"""Reads that must not hold up the rest of the server, on each store: a ``nissa-server`` process per case, loaded
through its own HTTP and ingest, while ``/healthz`` and a trainer's acks are probed every 50 ms.

- **histograms**: a run of ``--hist-events`` ``histogram`` events of ``--layers`` distributions of ``--bins`` bins
  (a model's every layer, as any trainer may send); ``--at-once`` clients read one layer's distributions (every
  step: the default ``max_steps``) over and over for ``--seconds``: each read's time, the probes' p99, the
  server's RSS growth.
- **wide**: a run with ``--wide-names`` metric names; from the moment its last event is acked (its series not
  charted yet), ``--at-once`` clients read it over and over (the run, its series listing, one of its series) while
  a 1-point series of another run is read every 50 ms: that read's time.
- **runs**: ``--runs`` runs (as ``bench/runs_table.py`` fills them); two trainers stream as fast as their acks
  come for ``--seconds`` alone, then as long again while ``--readers`` clients repeat ``GET /runs?q=…&sort=…``
  (``runs_table.QUERIES``): events/s acked alone and loaded (``ingest_ratio=``), ``/healthz`` p99 loaded, reads
  answered 429.

    python bench/read_isolation.py [--cases histograms,wide,runs] [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.backends import each_database  # noqa: E402
from bench.load_probes import acked, ingest, p99, probing, rss_mb, server, subprocess_figures  # noqa: E402
from bench.runs_table import BATCH, QUERIES, fill_batch  # noqa: E402
from leyline import Histograms, Metrics, encode, make_event  # noqa: E402
from leyline.frames import EventBatch  # noqa: E402
from leyline.payloads_histogram import Distribution  # noqa: E402
from nissa_server.store import create_store  # noqa: E402

SCRIPT = str(Path(__file__).resolve())


async def _send_all(url: str, run_id: str, events: list, per_frame: int) -> None:
    async with ingest(url, run_id) as ws:
        for at in range(0, len(events), per_frame):
            await ws.send(encode(EventBatch(events=events[at:at + per_frame])).decode())
        await acked(ws, len(events))


def _layers(args: argparse.Namespace, step: int, rng: random.Random) -> Histograms:
    out = []
    for i in range(args.layers):
        bins = [rng.randrange(100) for _ in range(args.bins)]
        out.append(Distribution(name=f"layer{i}", min=-1.0 - i, max=1.0 + i, count=sum(bins), bins=bins))
    return Histograms(histograms=out)


async def histograms(url: str, pid: int, args: argparse.Namespace) -> dict[str, float]:
    rng = random.Random(0)
    events = [make_event(_layers(args, step, rng), run_id="hist", seq=step, ts=1.7e9 + step, step=step * 100)
              for step in range(1, args.hist_events + 1)]
    await _send_all(url, "hist", events, 8)
    path = f"/runs/hist/histograms/layer{args.layers // 2}"
    rss = [rss_mb(pid)]
    async with probing(url) as (http, probes):
        reads = asyncio.ensure_future(subprocess_figures(SCRIPT, "--read-loop", url, str(args.seconds),
                                                         str(args.at_once), path))
        while not reads.done():
            rss.append(rss_mb(pid))
            await asyncio.sleep(0.02)
        count, p50, worst, refused = await reads
    return {"hist_reads": count, "hist_read_ms_p50": p50, "hist_read_ms_max": worst, "hist_refused": refused,
            "hist_rss_growth_mb": max(rss) - rss[0], **probes.figures("hist_")}


async def wide(url: str, pid: int, args: argparse.Namespace) -> dict[str, float]:
    names = [f"w.{i:06d}" for i in range(args.wide_names)]
    events = [make_event(Metrics(values={n: float(k) for n in names[at:at + 256]}), run_id="wide", seq=k + 1,
                         ts=1.7e9 + k, step=k) for k, at in enumerate(range(0, len(names), 256))]
    await _send_all(url, "other", [make_event(Metrics(values={"loss": 0.5}), run_id="other", seq=1, ts=1.7e9)], 1)
    await _send_all(url, "wide", events, 100)
    paths = ["/runs/wide", "/runs/wide/series?limit=10000", f"/runs/wide/series/{names[5]}"]
    times: list[float] = []
    async with probing(url) as (http, probes):
        reads = asyncio.ensure_future(subprocess_figures(SCRIPT, "--read-loop", url, str(args.seconds),
                                                         str(args.at_once), *paths))
        while not reads.done():
            began = time.perf_counter()
            reply = await http.get("/runs/other/series/loss")
            assert reply.status_code == 200, reply.text[:200]
            times.append(time.perf_counter() - began)
            await asyncio.sleep(0.05)
        count, p50, worst, refused = await reads
    return {"wide_reads": count, "wide_read_ms_p50": p50, "wide_read_ms_max": worst, "wide_refused": refused,
            "other_series_ms_p50": statistics.median(times) * 1000, "other_series_ms_p99": p99(times) * 1000,
            "other_series_ms_max": max(times) * 1000, **probes.figures("wide_")}


async def _fill_runs(db: str, runs: int) -> None:
    store = create_store(db)
    store.open()
    store.start()
    try:
        for first in range(1, runs + 1, BATCH):
            n = min(BATCH, runs + 1 - first)
            await store.call(lambda conn, first=first, n=n: fill_batch(conn, first, n, 0, 20))
    finally:
        await store.close()


async def runs(url: str, args: argparse.Namespace) -> dict[str, float]:
    trainers = [SCRIPT, "--trainers", url, str(args.seconds)]
    alone = (await subprocess_figures(*trainers))[0]
    async with probing(url) as (http, probes):
        paths = [f"/runs?q={q}&sort={s}&offset={o}" for q, s, o in QUERIES]
        loaded, reads = await asyncio.gather(subprocess_figures(*trainers), subprocess_figures(
            SCRIPT, "--read-loop", url, str(args.seconds), str(args.readers), *paths))
    return {"ingest_alone_per_s": alone, "ingest_loaded_per_s": loaded[0], "ingest_ratio": loaded[0] / alone,
            "runs_reads": reads[0], "runs_read_ms_p50": reads[1], "runs_read_ms_max": reads[2],
            "runs_refused": reads[3], **probes.figures("runs_")}


async def _read_loop(url: str, seconds: float, clients: int, paths: list[str]) -> None:
    """``clients`` clients each reading ``paths`` in turn until ``seconds`` are up, each at least once however
    loaded the machine (a 429 waits its Retry-After): reads answered, p50 and max ms, reads refused."""
    times: list[float] = []
    refused = 0
    until = time.perf_counter() + seconds

    async def client(http: httpx.AsyncClient, first: int) -> None:
        nonlocal refused
        at = first
        while at == first or time.perf_counter() < until:
            began = time.perf_counter()
            reply = await http.get(paths[at % len(paths)])
            if reply.status_code == 429:
                refused += 1
                await asyncio.sleep(float(reply.headers.get("retry-after", "1")))
                continue
            assert reply.status_code == 200, reply.text[:200]
            times.append(time.perf_counter() - began)
            at += 1

    async with httpx.AsyncClient(base_url=url, timeout=600) as http:
        await asyncio.gather(*(client(http, i) for i in range(clients)))
    print(len(times), statistics.median(times) * 1000, max(times) * 1000, refused)


async def _trainers(url: str, seconds: float, n: int = 2, batch: int = 500) -> None:
    """``n`` trainers streaming 8 metrics an event, a batch at a time as fast as acks come: events/s acked."""
    until = time.perf_counter() + seconds
    stamp = int(time.time() * 1000)

    async def trainer(i: int) -> int:
        run_id, seq = f"trainer-{stamp}-{i}", 0
        async with ingest(url, run_id) as ws:
            while time.perf_counter() < until:
                events = [make_event(Metrics(values={f"m{j}": (seq + k) / 7 + j for j in range(8)}), run_id=run_id,
                                     seq=seq + k + 1, ts=1.7e9 + seq + k, step=seq + k) for k in range(batch)]
                await ws.send(encode(EventBatch(events=events)).decode())
                seq += batch
                await acked(ws, seq)
        return seq

    began = time.perf_counter()
    total = sum(await asyncio.gather(*(trainer(i) for i in range(n))))
    print(total / (time.perf_counter() - began))


async def measure(backend: str, db: str, args: argparse.Namespace) -> dict[str, float]:
    out: dict[str, float] = {}
    if "runs" in args.cases:
        await _fill_runs(db, args.runs)
    for case in args.cases:
        with server(db) as (url, pid):
            began = time.perf_counter()
            if case == "histograms":
                out.update(await histograms(url, pid, args))
            elif case == "wide":
                out.update(await wide(url, pid, args))
            else:
                out.update(await runs(url, args))
            print(f"  {backend} {case}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
    return {f"{k}_{backend}": v for k, v in out.items()}


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults (the issue's shapes)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="histograms,wide,runs")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--hist-events", type=int, default=120)
    parser.add_argument("--layers", type=int, default=150)
    parser.add_argument("--bins", type=int, default=512)
    parser.add_argument("--wide-names", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--at-once", type=int, default=3)
    parser.add_argument("--readers", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    args.cases = [c for c in args.cases.split(",") if c]
    unknown = set(args.cases) - {"histograms", "wide", "runs"}
    if unknown:
        parser.error(f"--cases: unknown {', '.join(sorted(unknown))} (histograms, wide, runs)")
    return args


def main() -> int:
    if sys.argv[1:2] == ["--read-loop"]:
        url, seconds, clients, *paths = sys.argv[2:]
        asyncio.run(_read_loop(url, float(seconds), int(clients), paths))
        return 0
    if sys.argv[1:2] == ["--trainers"]:
        asyncio.run(_trainers(sys.argv[2], float(sys.argv[3])))
        return 0
    args = options(sys.argv[1:])
    figures: dict[str, float] = {}
    for backend, db in each_database(args.backends):
        figures.update(asyncio.run(measure(backend, db, args)))
    print(" ".join(f"{k}={v:.1f}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
