"""A lab's runs table at scale: a page of 100 runs, filtered and sorted, out of ``--runs`` (10,000) with realistic
configs (30 keys) and summaries (20 metrics), on SQLite and PostgreSQL side by side, against a full scan of the
same runs (every run read, as a table that loads them all does) in the same invocation.

Per backend: a fresh database filled through the store's own writes (a run claimed, its ``run_started``'s
project, group, tags and config rows, its 20 series folded into their summaries as a series pass folds them).
PostgreSQL is vacuumed after the load (``VACUUM ANALYZE``: its statistics and visibility map, as autovacuum keeps
them for tables that grew by inserts over time); SQLite runs without statistics, as a server leaves it. Then each
query of ``QUERIES`` (filters and sorts of the filter language, and a page deep into a sort) is read ``--repeats``
times as ``GET /runs`` reads it (``runs_page.page_runs`` on a reader connection, the page encoded as its JSON
reply); ``page_ms_p95`` is the 95th percentile over all of them. ``full_scan_ms`` is the median of reading every
run with its config and summaries (``queries.list_runs``), and ``ratio=`` the SQLite page's p95 over the SQLite
full scan.

With ``--web`` (the default), the web page's first paint over each database just filled: a real ``nissa-server``
process serves it on 127.0.0.1, Debian's chromium (through Playwright, no browser download) opens ``/ui``
``--web-repeats`` times, each in a fresh browser context (no cache), after one untimed visit that warms the
server; ``web_first_paint_ms_p50_<backend>``/``_max_<backend>`` time from the navigation's start until the runs
table shows its first row. Goal: under 1 s. Skipped (with a line saying why) without chromium or Playwright.

    python bench/runs_table.py [--runs 10000] [--repeats 10] [--backends sqlite,postgresql] [--no-web]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import msgspec
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench.backends import each_database  # noqa: E402
from bench.processes import stop_process  # noqa: E402
from leyline import RunStarted  # noqa: E402
from leyline.query import parse, parse_sort  # noqa: E402
from nissa_server.routes.common import json_response  # noqa: E402
from nissa_server.store import create_store, queries, run_meta_sql, runs_page, sql, summaries_sql  # noqa: E402

METRICS = ("train_loss", "val_loss", "test_loss", "val_acc", "train_acc", "test_acc", "val_f1", "val_auc",
           "val_error", "grad_norm", "lr", "throughput", "gpu_mem", "epoch_time", "weight_norm", "entropy",
           "kl", "reward", "ppl", "bleu")
TAGS = ("baseline", "sweep", "ablation", "broken", "keep", "long", "amp", "ema", "warmup", "cosine")
QUERIES: tuple[tuple[str, str, int], ...] = (
    ("", "", 0),
    ("", "-val_loss.best", 0),
    ("project:proj3", "", 0),
    ("project:proj3 tag:baseline", "-val_acc.best", 0),
    ("config.lr>=0.01 val_loss<0.5", "config.lr", 0),
    ("name~sweep-1 status:finished", "", 0),
    ("val_loss.min<0.4 config.optimizer:adam", "-val_acc.last", 0),
    ("group:g17", "name", 0),
    ("config.model.depth>=8 -tag:broken", "-test_acc", 0),
    ("", "-val_loss.best", 5000),
    ("project~proj val_f1>0.5 config.amp:true", "config.batch_size,-val_auc", 0),
)
"""(q, sort, offset): what a lab's people ask of its runs table."""
BATCH = 250
"""Runs written per transaction."""
FIRST_ROW = "#runs tbody tr[data-run-id]"
"""The runs table's first row of a run: the page has painted what a visitor came for."""


def _config(rng: random.Random, i: int) -> dict:
    config = {"lr": 10 ** rng.uniform(-4, -1), "batch_size": rng.choice([32, 64, 128, 256]),
              "optimizer": rng.choice(["adam", "sgd", "adamw"]), "seed": i, "epochs": rng.choice([10, 30, 90]),
              "model.depth": rng.choice([4, 8, 12, 16]), "model.width": rng.choice([128, 256, 512]),
              "model.act": rng.choice(["relu", "gelu"]), "dropout": rng.uniform(0, 0.5),
              "weight_decay": 10 ** rng.uniform(-6, -2), "amp": rng.random() < 0.5, "ema": rng.random() < 0.3,
              "warmup_steps": rng.choice([0, 500, 1000]), "scheduler": rng.choice(["cosine", "step", "none"]),
              "data.name": rng.choice(["cifar10", "cifar100", "imagenet"]), "data.augment": rng.random() < 0.8}
    for j in range(30 - len(config)):
        config[f"extra.k{j:02d}"] = rng.choice([rng.uniform(0, 1), rng.randint(0, 100), f"v{rng.randint(0, 9)}"])
    return config


def _series(rng: random.Random, run_key: int, points: int) -> dict:
    out = {}
    for name in METRICS:
        start, end = rng.uniform(0.5, 3), rng.uniform(0.01, 1)
        values = np.linspace(start, end, points) + np.array([rng.gauss(0, 0.05) for _ in range(points)])
        step = np.arange(points, dtype=np.float64) * 100
        out[(run_key, f"{name}{{rank=0}}")] = (name, [step, step / 100, np.full(points, np.nan), step, values])
    return out


def fill_batch(conn, first: int, n: int, seed: int, points: int) -> None:
    """Runs ``first`` .. ``first + n - 1``, as their events would have left them."""
    rng = random.Random(seed * 1_000_003 + first)
    now = 1.7e9
    for i in range(first, first + n):
        run_id = f"sweep-{i:05d}"
        row = sql.claim_run(conn, run_id, run_id, b"x" * 32, live=False, now=now + i)
        started = RunStarted(name=run_id, config=_config(rng, i), project=f"proj{i % 10}", group=f"g{i % 200}",
                             tags=rng.sample(TAGS, rng.randint(0, 3)), notes="")
        conn.execute("UPDATE runs SET status = 'finished', config = ?, started_at = ?, ended_at = ?, name = ?"
                     " WHERE run_key = ?", (msgspec.json.encode(started), now + i, now + i + 600, run_id, row.run_key))
        sql.take_stream(conn, row.run_key, 0, "bench", 0.0)
        run_meta_sql.started(conn, row.run_key, started)
        summaries_sql.write(conn, _series(rng, row.run_key, points), [], {row.run_key})


def page(conn, q: str, sort: str, offset: int) -> int:
    total, runs = runs_page.page_runs(conn, 100, offset, parse(q), parse_sort(sort), time.time(), "bench")
    return len(json_response(runs).body) + total * 0


def full_scan(conn) -> int:
    runs = queries.list_runs(conn, time.time(), "bench")
    return len(json_response(runs).body)


def vacuum(db: str) -> None:
    """What PostgreSQL's autovacuum does to tables that grew (a bulk load outruns it): statistics brought up to
    date, and the pages whose rows every reader sees marked so, so that a read from an index need not visit them
    (``VACUUM`` runs outside a transaction: a connection of its own)."""
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


async def run_backend(db: str, args: argparse.Namespace) -> dict[str, float]:
    store = create_store(db)
    store.open()
    store.start()
    try:
        began = time.perf_counter()
        for first in range(1, args.runs + 1, BATCH):
            n = min(BATCH, args.runs + 1 - first)
            await store.call(lambda conn, first=first, n=n: fill_batch(conn, first, n, args.seed, args.points))
        fill_s = time.perf_counter() - began
        if store.backend == "postgresql":
            vacuum(db)
        read = store.read_sync
        times = []
        for q, sort, offset in QUERIES:
            read(page, q, sort, offset)  # warm: the first read of a query plans it
            for _ in range(args.repeats):
                t = time.perf_counter()
                read(page, q, sort, offset)
                times.append((time.perf_counter() - t) * 1000)
        scans = []
        for _ in range(args.scans):
            t = time.perf_counter()
            read(full_scan)
            scans.append((time.perf_counter() - t) * 1000)
    finally:
        await store.close()
    return {"p95": float(np.percentile(times, 95)), "p50": statistics.median(times), "max": max(times),
            "scan": statistics.median(scans), "fill_s": fill_s}


def start_server(db: str, log_path: pathlib.Path) -> tuple[subprocess.Popen, str]:
    """``nissa-server`` over ``db`` (``--db``) on 127.0.0.1, a kernel-chosen port, its log appended to ``log_path``;
    returns (process, base URL)."""
    script = shutil.which("nissa-server", path=os.path.dirname(sys.executable)) or shutil.which("nissa-server")
    if script is None:
        raise RuntimeError("nissa-server is not installed in this environment")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([script, "--host", "127.0.0.1", "--port", "0", "--db", db],
                                stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()  # "nissa-server listening on http://127.0.0.1:PORT"
    if not line.startswith("nissa-server listening on "):
        stop_process(proc)
        raise RuntimeError(f"nissa-server did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[1]


def first_paint(browser, url: str) -> float:
    """Milliseconds from the start of navigating a fresh context to ``url`` until the runs table's first row."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        began = time.perf_counter()
        page.goto(url, wait_until="commit")
        page.wait_for_selector(FIRST_ROW, state="visible", timeout=60_000)
        return (time.perf_counter() - began) * 1000
    finally:
        context.close()


def web_first_paint(db: str, log_path: pathlib.Path, repeats: int) -> list[float]:
    """``first_paint`` of ``/ui`` ``repeats`` times over a server on ``db`` (after one untimed visit)."""
    chromium = os.environ.get("NISSA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise RuntimeError("no chromium on this machine (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    proc, base = start_server(db, log_path)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                first_paint(browser, base + "/ui")  # the server's first read of the runs, the browser's first start
                return [first_paint(browser, base + "/ui") for _ in range(repeats)]
            finally:
                browser.close()
    finally:
        stop_process(proc)


def web_paints(backend: str, db: str, args: argparse.Namespace) -> list[float]:
    """The first paints over ``backend``'s database ``db``, with a line saying them (and whether the goal is met),
    or why there are none."""
    try:
        with tempfile.TemporaryDirectory() as tmp:
            paints = web_first_paint(db, pathlib.Path(tmp) / "server.log", args.web_repeats)
    except (ImportError, RuntimeError) as err:
        print(f"{'web':>10}: unavailable ({err})", flush=True)
        return []
    p50, worst = statistics.median(paints), max(paints)
    print(f"{'web':>10}: /ui over {args.runs:,} runs ({backend}), navigation to the runs table's first row over "
          f"{len(paints)} fresh pages: p50 {p50:.0f} ms, max {worst:.0f} ms; goal < 1000 ms "
          f"{'met' if worst < 1000 else 'NOT met'}", flush=True)
    return paints


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=50, help="points per series folded into each summary")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--scans", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--web", action=argparse.BooleanOptionalAction, default=True,
                        help="time the web page's first paint over each backend's database (default: on)")
    parser.add_argument("--web-repeats", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    results: dict[str, dict[str, float]] = {}
    paints: dict[str, list[float]] = {}
    for backend, db in each_database(args.backends):
        results[backend] = r = asyncio.run(run_backend(db, args))
        print(f"{backend:>10}: {args.runs:,} runs (30 config keys, {len(METRICS)} metrics each, stored in "
              f"{r['fill_s']:.0f} s); a page of 100 over {len(QUERIES)} filters and sorts: p50 {r['p50']:.1f} "
              f"ms, p95 {r['p95']:.1f} ms, max {r['max']:.1f} ms; every run read {r['scan']:.0f} ms", flush=True)
        if args.web:
            paints[backend] = web_paints(backend, db, args)
    pairs = [f"runs={args.runs}", f"queries={len(QUERIES)}"]
    for backend, r in results.items():
        pairs += [f"page_ms_p95_{backend}={r['p95']:.2f}", f"page_ms_p50_{backend}={r['p50']:.2f}",
                  f"full_scan_ms_{backend}={r['scan']:.1f}"]
    if "sqlite" in results:
        pairs.append(f"ratio={results['sqlite']['p95'] / results['sqlite']['scan']:.4f}")
    for backend, times in paints.items():
        if times:
            pairs += [f"web_first_paint_ms_p50_{backend}={statistics.median(times):.0f}",
                      f"web_first_paint_ms_max_{backend}={max(times):.0f}"]
    print(" ".join(pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
