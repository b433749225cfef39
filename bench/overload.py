"""Ingest first under overload: many trainers and many watchers on one server, on this machine.

A ``nissa-server`` (SQLite) subprocess; ``--trainers`` ingest connections (in ``--procs`` processes) each
stream ``--rate`` events/s as a NissaHub does at that rate (an event per frame: the hub's gathering
window is shorter than the gap between events) and never reconnect, so every drop shows; ``--watchers``
``/ws/watch`` connections in one process each follow every run and resume after a lagging close; this
process asks ``/healthz`` ten times a second. Loopback only; ``--seconds`` of load, then a short drain.

Figures: trainer connections dropped by the server (the goal is 0), ``/healthz`` latency p50/p99/max
(goal: p99 under 1 s), events acknowledged as stored over events offered, watcher delivery latency
p50/p99 and lagging closes, server CPU per stored event. ``ratio=`` is the ``/healthz`` p99 over the 1 s
goal (under 1 meets it).

    python bench/overload.py [--trainers 300] [--rate 20] [--watchers 20] [--seconds 20] [--procs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import httpx
from ingest import cpu_seconds, free_port  # bench/ is the script's directory
from lab import watch_main
from streams import child, child_result, stream

from nissa.hub.config import HubConfig

DRAIN_S = 5.0


def trainers_main(url: str, runs: list[str], rate: int, seconds: float, t0: float) -> None:
    async def main() -> list[dict]:
        return await asyncio.gather(*(stream(url, r, rate, seconds, t0, linger_s=HubConfig.send_linger_s,
                                             drain_s=DRAIN_S) for r in runs))

    print(json.dumps(dict(zip(runs, asyncio.run(main()), strict=True))), flush=True)


async def probe_health(url: str, t0: float, until: float) -> list[float]:
    """``/healthz`` latencies in seconds, asked ten times a second (a timeout counts as 5 s)."""
    out: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=5.0) as client:
        await asyncio.sleep(max(0.0, t0 - time.time()))
        while time.time() < until:
            began = time.perf_counter()
            try:
                (await client.get("/healthz")).raise_for_status()
                out.append(time.perf_counter() - began)
            except httpx.TimeoutException:
                out.append(5.0)
            await asyncio.sleep(max(0.0, 0.1 - (time.perf_counter() - began)))
    return out



def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] if values else float("nan")


def run(args: argparse.Namespace, root: pathlib.Path) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    exe = os.path.join(os.path.dirname(sys.executable), "nissa-server")
    server = subprocess.Popen([exe, "--port", str(port), "--db", str(root / "overload.db"), "--artifact-dir",
                               str(root / "art"), "--max-watchers", str(args.watchers + 10)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None and "listening" in server.stdout.readline(), "nissa-server did not start"
        runs = [f"load-{i:04d}" for i in range(args.trainers)]
        t0 = time.time() + 5.0  # every connection open by then
        watcher = child(__file__, "--watch-child", url, ",".join([""] * args.watchers), str(t0), str(args.seconds))
        shares = [runs[i::args.procs] for i in range(args.procs)]
        trainers = [child(__file__, "--trainers-child", url, ",".join(s), str(args.rate), str(args.seconds), str(t0))
                    for s in shares if s]
        cpu0 = cpu_seconds(server.pid)
        health = asyncio.run(probe_health(url, t0, t0 + args.seconds + DRAIN_S))
        streams: dict = {}
        for proc in trainers:
            streams.update(child_result(proc, args.seconds + DRAIN_S + 120))
        cpu = cpu_seconds(server.pid) - cpu0
        watched = child_result(watcher, args.seconds + DRAIN_S + 120)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)
    stored = sum(s["stored"] for s in streams.values())
    drops = [s["dropped"] for s in streams.values() if s["dropped"] is not None]
    return {"dropped": len(drops), "drop_reasons": sorted(set(drops)), "stored_ratio": stored / max(1, sum(
        s["offered"] for s in streams.values())), "healthz_p50_ms": _pct(health, 0.5) * 1000,
        "healthz_p99_ms": _pct(health, 0.99) * 1000, "healthz_max_ms": _pct(health, 1.0) * 1000,
        "watch_p50_ms": watched["p50_ms"], "watch_p99_ms": watched["p99_ms"], "watcher_resumes": watched["resumes"],
        "server_us_per_event": cpu / max(1, stored) * 1e6}


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainers", type=int, default=300)
    parser.add_argument("--rate", type=int, default=20, help="events/s per trainer")
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--procs", type=int, default=3, help="processes the trainers' connections share")
    parser.add_argument("--trainers-child", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--watch-child", nargs=4, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    if args.trainers_child:
        url, runs, rate, seconds, t0 = args.trainers_child
        trainers_main(url, runs.split(","), int(rate), float(seconds), float(t0))
        return 0
    if args.watch_child:
        url, targets, t0, seconds = args.watch_child
        watch_main(url, targets.split(","), float(t0), float(seconds))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        r = run(args, pathlib.Path(tmp))
    print(f"trainers dropped {r['dropped']} of {args.trainers} {r['drop_reasons'] or ''}  /healthz p50 "
          f"{r['healthz_p50_ms']:.0f} ms  p99 {r['healthz_p99_ms']:.0f} ms  max {r['healthz_max_ms']:.0f} ms  "
          f"stored/offered {r['stored_ratio']:.4f}  watchers p50 {r['watch_p50_ms']:.0f} ms  p99 "
          f"{r['watch_p99_ms']:.0f} ms  (lagging closes {r['watcher_resumes']})  server "
          f"{r['server_us_per_event']:.1f} us/event", flush=True)
    pairs = [f"trainers={args.trainers}", f"rate={args.rate}", f"watchers={args.watchers}",
             f"seconds={args.seconds:g}", f"trainers_dropped={r['dropped']}", f"stored_ratio={r['stored_ratio']:.4g}",
             f"healthz_p99_ms={r['healthz_p99_ms']:.4g}", f"healthz_max_ms={r['healthz_max_ms']:.4g}",
             f"watch_p99_ms={r['watch_p99_ms']:.4g}", f"watcher_resumes={r['watcher_resumes']}",
             f"server_us_per_event={r['server_us_per_event']:.4g}", f"ratio={r['healthz_p99_ms'] / 1000:.4g}"]
    print(" ".join(pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
