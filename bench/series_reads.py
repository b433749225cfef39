"""Series reads that cost more than they should, on the code before a change and after it, side by side in
one invocation: two ``nissa-server`` processes in turn (SQLite), each filled through its own ingest.

Two cases:

- **Many label sets.** A run with ``--label-sets`` label sets of ``loss`` (a loop that labels each step).
  The server's CPU per ``GET …/series/loss?labels=i=5`` (reads one at a time, for 3 s), then
  ``--at-once`` of them at once while ``/healthz`` is asked every 50 ms and a trainer's stream sends an event
  every 50 ms: their latencies (p99 and max) meanwhile.
- **An overlay.** ``--overlay-runs`` runs × ``--overlay-sets`` label sets × ``--overlay-points`` points of
  ``loss``, read in one call (``…/series/loss?runs=…``): the bytes of one reply, and the server's resident
  memory (sampled every 20 ms) while ``--at-once`` clients read all of it at once (following a reply's
  ``Link`` to the rest where there is one), and the ``/healthz`` and ack latencies meanwhile.

The code before is a checkout (``--before DIR``) or a git revision exported to a temporary directory
(``--before-rev REV``; by default ``BEFORE_REV``, the last commit before series reads were bounded).
``cpu_ratio=`` is the labelled read's CPU after over before; ``rss_ratio=`` the overlay's memory growth after
over before.

    python bench/series_reads.py [--before-rev REV | --before DIR] [--label-sets 100000] [--overlay-points 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import pathlib
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench.load_probes import Probes, acked, cpu_seconds, ingest, metric_batch, p99, rss_mb, server  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
BEFORE_REV = "3315592923486f4cb756f57f7ae9ea4e2d8236e9"
"""The last commit before series reads were bounded (label index, a page per reply, a read at a time)."""
FRAME = 2000


async def fill(url: str, run_id: str, sets: int, points: int) -> None:
    """``sets`` label sets of ``loss`` with ``points`` points each, streamed and acknowledged."""
    total = sets * points
    async with ingest(url, run_id) as ws:
        for first in range(0, total, FRAME):
            ks = range(first, min(total, first + FRAME))
            await ws.send(metric_batch(run_id, [k % sets for k in ks], [k // sets for k in ks], first + 1))
        await acked(ws, total)


async def charted(db: pathlib.Path) -> None:
    """Until the series pass has written every stored event as series rows (its watermark at the newest event):
    reads then find them as rows, not as events past the watermark that each read charts for itself."""
    while True:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            mark = conn.execute("SELECT upto FROM series_progress WHERE id = 1").fetchone()[0]
            top = conn.execute("SELECT value FROM counters WHERE name = 'event_id'").fetchone()[0]
        finally:
            conn.close()
        if mark >= top:
            return
        await asyncio.sleep(0.5)


async def readers(url: str, path: str, n: int) -> tuple[int, int, int]:
    """``n`` clients reading ``path`` at once (following Links), in a process of their own: receiving megabytes
    would hold up this process's loop, and with it the probes' own timing. The first client's figures."""
    proc = await asyncio.create_subprocess_exec(sys.executable, __file__, "--read", url, path, str(n),
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    first, total, replies = out.decode().split()[-3:]
    return int(first), int(total), int(replies)


async def _read_at_once(url: str, path: str, n: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=600) as http:
        results = await asyncio.gather(*(read_all(http, path) for _ in range(n)))
    print(*results[0])


async def read_all(http: httpx.AsyncClient, path: str) -> tuple[int, int, int]:
    """(bytes of the first reply, bytes of all, replies) of a read that follows each reply's Link."""
    first = total = replies = 0
    while path:
        reply = await http.get(path)
        assert reply.status_code == 200, reply.text[:200]
        total += len(reply.content)
        first = first or len(reply.content)
        replies += 1
        found = re.fullmatch(r'<([^>]*)>; rel="next"', reply.headers.get("link", ""))
        path = found.group(1) if found else ""
    return first, total, replies


async def measure(code: pathlib.Path, db: pathlib.Path, args: argparse.Namespace) -> dict[str, float]:
    out: dict[str, float] = {}
    runs = [f"overlay-{i}" for i in range(args.overlay_runs)]
    with server(str(db), code) as (url, _):
        began = time.perf_counter()
        await asyncio.gather(fill(url, "many", args.label_sets, 1),
                             *(fill(url, run, args.overlay_sets, args.overlay_points) for run in runs))
        await charted(db)
        print(f"  {code}: filled in {time.perf_counter() - began:.0f} s", file=sys.stderr)
    with server(str(db), code) as (url, pid):  # afresh on the data: its memory is the reads', not what ingest left
        async with httpx.AsyncClient(base_url=url, timeout=600) as http:
            out.update(await _reads(http, url, pid, runs, args))
    return out


async def _reads(http: httpx.AsyncClient, url: str, pid: int, runs: list[str],
                 args: argparse.Namespace) -> dict[str, float]:
    out: dict[str, float] = {}
    labelled = "/runs/many/series/loss?labels=i=5"
    cpu, reads, began = cpu_seconds(pid), 0, time.perf_counter()
    while reads < 1 or (reads < 200 and time.perf_counter() - began < 3.0):  # a clock tick is 10 ms
        assert (await http.get(labelled)).status_code == 200
        reads += 1
    out["labelled_cpu_ms"] = (cpu_seconds(pid) - cpu) / reads * 1000
    async with Probes(url, http, "probe-labelled").running() as probes:
        began = time.perf_counter()
        await readers(url, labelled, args.at_once)
        out["at_once_s"] = time.perf_counter() - began
    for name, seen in (("healthz", probes.healthz), ("ack", probes.acks)):
        out[f"{name}_p99_ms"], out[f"{name}_max_ms"] = p99(seen) * 1000, max(seen, default=0.0) * 1000
    overlay = f"/runs/{runs[0]}/series/loss?runs={','.join(runs[1:])}&max_points=2000"
    rss = [rss_mb(pid)]
    async with Probes(url, http, "probe-overlay").running() as probes:
        reads_ = asyncio.ensure_future(readers(url, overlay, args.at_once))
        while not reads_.done():
            rss.append(rss_mb(pid))
            await asyncio.sleep(0.02)
        first, total, replies = await reads_
    for name, seen in (("overlay_healthz", probes.healthz), ("overlay_ack", probes.acks)):
        out[f"{name}_p99_ms"] = p99(seen) * 1000
    out["rss_before_mb"], out["rss_peak_mb"] = rss[0], max(rss)
    out["overlay_reply_mb"], out["overlay_total_mb"], out["overlay_replies"] = first / 1e6, total / 1e6, replies
    return out


@contextlib.contextmanager
def before_code(args: argparse.Namespace) -> Iterator[pathlib.Path]:
    if args.before:
        yield pathlib.Path(args.before).resolve()
        return
    with tempfile.TemporaryDirectory(prefix="nissa-before-") as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before_rev], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        yield pathlib.Path(tmp)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--before", help="a checkout of the code before")
    where.add_argument("--before-rev", default=BEFORE_REV,
                       help="a git revision of the code before, exported to a temporary directory "
                       "(default: %(default)s)")
    parser.add_argument("--label-sets", type=int, default=100_000)
    parser.add_argument("--overlay-runs", type=int, default=5)
    parser.add_argument("--overlay-sets", type=int, default=1000)
    parser.add_argument("--overlay-points", type=int, default=100)
    parser.add_argument("--at-once", type=int, default=8)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    if sys.argv[1:2] == ["--read"]:  # the readers' process (``readers``)
        asyncio.run(_read_at_once(sys.argv[2], sys.argv[3], int(sys.argv[4])))
        return 0
    args = options(argv)
    figures = {}
    with before_code(args) as before, tempfile.TemporaryDirectory(prefix="nissa-series-reads-") as tmp:
        for label, code in (("before", before), ("after", ROOT)):
            figures[label] = asyncio.run(measure(code, pathlib.Path(tmp) / f"{label}.db", args))
            print(f"{label}: " + " ".join(f"{k}={v:.1f}" for k, v in figures[label].items()), file=sys.stderr)
    b, a = figures["before"], figures["after"]
    keys = ("labelled_cpu_ms", "healthz_p99_ms", "healthz_max_ms", "ack_p99_ms", "ack_max_ms", "at_once_s",
            "overlay_reply_mb", "overlay_replies", "rss_before_mb", "rss_peak_mb", "overlay_healthz_p99_ms",
            "overlay_ack_p99_ms")
    pairs = [f"label_sets={args.label_sets}",
             f"overlay={args.overlay_runs}x{args.overlay_sets}x{args.overlay_points}"]
    pairs += [f"{k}_{label}={figures[label][k]:.1f}" for k in keys for label in ("before", "after")]
    growth_before, growth_after = b["rss_peak_mb"] - b["rss_before_mb"], a["rss_peak_mb"] - a["rss_before_mb"]
    pairs += [f"cpu_ratio={a['labelled_cpu_ms'] / max(b['labelled_cpu_ms'], 1e-3):.4f}",
              f"rss_ratio={growth_after / max(growth_before, 1.0):.3f}"]
    print(" ".join(pairs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
