"""Emit → watcher latency through nissa-server at a steady 1,000 events/s.

A NissaHub streams to a nissa-server subprocess; a ``/ws/watch`` client on the same
machine takes each event's latency as its arrival time minus the envelope's ``ts``
(stamped inside ``emit``), so both ends read the same clock. The goal is p99 < 50 ms.

    python bench/latency.py [--seconds 10] [--rate 1000]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

from ingest import Server, Watcher

from leyline import RunStarted
from leyline.esper import EpochCompleted
from nissa.hub import HubConfig, NissaHub


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def paced_emit(hub: NissaHub, n: int, rate: float) -> None:
    payload = EpochCompleted(accuracy=0.5, val_loss=1.0)
    period = 1.0 / rate
    start = time.perf_counter()
    for i in range(n):
        target = start + i * period
        while (now := time.perf_counter()) < target:
            time.sleep(min(target - now, 0.0005))
        hub.emit(payload, step=i, epoch=0)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    n = int(args.seconds * args.rate)
    latencies: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, Server(pathlib.Path(tmp) / "nissa.db") as server:
        hub = NissaHub(HubConfig(run_id="latency", log_dir=pathlib.Path(tmp), server=server.url)).start()
        hub.emit(RunStarted(name="latency", config={}), step=0, epoch=0)
        hub.flush(timeout=30)
        first = hub.stats.logged + 1

        def record(seq: int, ts: float, arrived: float) -> None:
            if seq >= first:
                latencies.append(arrived - ts)

        watcher = Watcher(server.url, "latency", on_event=record)
        paced_emit(hub, n, args.rate)
        report = hub.flush(timeout=30)
        watcher.wait_seq(report.logged, timeout=30)
        watcher.close()
        hub.close(timeout=10)
    if len(latencies) < n:
        print(f"watcher received {len(latencies)} of {n} events", file=sys.stderr)
        return 1
    p50, p99, worst = (_pct(latencies, q) * 1000 for q in (0.5, 0.99, 1.0))
    print(f"emit -> watcher at {args.rate:.0f} events/s over {args.seconds:.0f} s: "
          f"p50 {p50:.2f} ms  p99 {p99:.2f} ms  max {worst:.2f} ms")
    print(f"events={n} rate={args.rate:.0f} p50_ms={p50:.2f} p99_ms={p99:.2f} max_ms={worst:.2f} "
          f"goal_p99_ms=50 p99_vs_goal={p99 / 50:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
