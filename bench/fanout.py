"""Fan-out cost of nissa-server: one ingest at a fixed rate with 0, 1, 10 and 50 watchers.

A real ``nissa-server`` subprocess; the ingest runs in this process, the watchers in a second one.
Per watcher count it reports the achieved ingest rate (events acked per second of wall time, from the
first send to the last ack) and the delivery latency each watcher saw (receive time minus the
event's ``ts``, stamped at send). Ratios compare against the 0-watcher phase of the same invocation.

    python bench/fanout.py [--rate 20000] [--seconds 4] [--batch 200] [--watchers 0,1,10,50]

Ends with one line: ``rate_0=… rate_1=… … p99_ms_1=… … ratio=<rate_10 / rate_0>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from array import array

import msgspec
from websockets.asyncio.client import connect

from leyline import Heartbeat, encode, make_event
from leyline.codec import decode_frame
from leyline.frames import Ack, EventBatch, Hello, Welcome


class _Stamp(msgspec.Struct):
    ts: float


class _WatchFrame(msgspec.Struct):
    events: list[_Stamp]
    cursor: int


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _ws(url: str) -> str:
    return "ws" + url[len("http"):]


# --- watcher side (a subprocess) -----------------------------------------------------------------


async def _watch_one(url: str, run_id: str, expected: int, lat: array, ready: asyncio.Event,
                     connected: list[int], total: int) -> int:
    decoder = msgspec.json.Decoder(_WatchFrame)
    got = 0
    async with connect(f"{_ws(url)}/ws/watch?run_id={run_id}&after_seq=0", max_size=None,
                       compression=None, open_timeout=60) as ws:
        connected[0] += 1
        if connected[0] == total:
            ready.set()
        while got < expected:
            frame = decoder.decode(await ws.recv())
            now = time.time()
            lat.extend(now - e.ts for e in frame.events)
            got += len(frame.events)
    return got


async def _watchers(url: str, run_id: str, count: int, expected: int, timeout: float) -> None:
    lats = [array("d") for _ in range(count)]
    ready, connected = asyncio.Event(), [0]
    tasks = [asyncio.create_task(_watch_one(url, run_id, expected, lats[i], ready, connected, count))
             for i in range(count)]
    await asyncio.wait_for(ready.wait(), 60)
    _out("ready")
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    received = [t.result() if t in done and not t.exception() else -1 for t in tasks]
    merged = sorted(x for a in lats for x in a)
    _out(json.dumps({"received": received, "latencies_ms": _quantiles(merged)}))


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": float("nan"), "p99": float("nan")}
    pick = lambda q: values[min(len(values) - 1, int(q * len(values)))] * 1000  # noqa: E731
    return {"p50": round(pick(0.50), 2), "p99": round(pick(0.99), 2)}


# --- ingest side ---------------------------------------------------------------------------------


async def _ingest(url: str, run_id: str, rate: float, seconds: float, batch: int) -> tuple[float, dict]:
    """Send ``rate`` events/s for ``seconds``; returns (events acked per second, ack latency quantiles)."""
    total = int(rate * seconds) // batch * batch
    period = batch / rate
    sent_at: dict[int, float] = {}
    ack_lat: list[float] = []
    async with connect(f"{_ws(url)}/ws/ingest", max_size=None, compression=None, open_timeout=60) as ws:
        await ws.send(encode(Hello(run_id=run_id, secret=secrets.token_urlsafe(32))).decode())
        assert isinstance(decode_frame(await ws.recv()), Welcome)

        async def acks() -> None:
            acked = 0
            while acked < total:
                frame = decode_frame(await ws.recv())
                if isinstance(frame, Ack):
                    now = time.perf_counter()
                    for seq in [s for s in sent_at if s <= frame.seq]:
                        ack_lat.append(now - sent_at.pop(seq))
                    acked = frame.seq

        reader = asyncio.create_task(acks())
        start = time.perf_counter()
        for i, first in enumerate(range(1, total + 1, batch)):
            delay = start + i * period - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            ts = time.time()
            events = [make_event(Heartbeat(uptime_s=float(seq)), run_id=run_id, seq=seq, ts=ts)
                      for seq in range(first, first + batch)]
            await ws.send(encode(EventBatch(events=events)).decode())
            sent_at[first + batch - 1] = time.perf_counter()
        await asyncio.wait_for(reader, 300)
        elapsed = time.perf_counter() - start
    return total / elapsed, _quantiles(sorted(ack_lat))


def _start_server(db: pathlib.Path) -> tuple[subprocess.Popen, str]:
    exe = pathlib.Path(sys.executable).with_name("nissa-server")
    proc = subprocess.Popen([str(exe), "--port", "0", "--db", str(db), "--log-level", "warning"],
                            stdout=subprocess.PIPE, text=True)
    match = re.search(r"listening on (http://\S+)", proc.stdout.readline() if proc.stdout else "")
    if not match:
        proc.kill()
        raise SystemExit("fanout: nissa-server did not start")
    return proc, match.group(1)


async def _phase(url: str, watchers: int, args: argparse.Namespace) -> dict:
    run_id = f"fanout-{watchers}-{os.getpid()}"
    total = int(args.rate * args.seconds) // args.batch * args.batch
    proc = None
    if watchers:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--_watch", url, run_id, str(watchers), str(total),
            stdout=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode().strip()
        if line != "ready":
            raise SystemExit(f"fanout: watchers failed to start: {line!r}")
    rate, ack = await _ingest(url, run_id, args.rate, args.seconds, args.batch)
    result = {"watchers": watchers, "rate": rate, "ack_ms": ack, "latencies_ms": None, "complete": True}
    if proc is not None:
        assert proc.stdout is not None
        stats = json.loads((await asyncio.wait_for(proc.stdout.readline(), 300)).decode())
        await proc.wait()
        result["latencies_ms"] = stats["latencies_ms"]
        result["complete"] = all(n == total for n in stats["received"])
    return result


async def _run(args: argparse.Namespace) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="nissa-fanout-") as tmp:
        server, url = _start_server(pathlib.Path(tmp) / "bench.db")
        try:
            return [await _phase(url, w, args) for w in args.watchers]
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=60)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=20_000, help="events per second offered by the ingest")
    p.add_argument("--seconds", type=float, default=4.0, help="length of each phase")
    p.add_argument("--batch", type=int, default=200, help="events per ingest frame")
    p.add_argument("--watchers", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 10, 50])
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_watch":
        url, run_id, count, expected = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        asyncio.run(_watchers(url, run_id, count, expected, timeout=300))
        return
    args = options(argv)
    results = asyncio.run(_run(args))
    base = results[0]["rate"] if results[0]["watchers"] == 0 else float("nan")
    fields = []
    for r in results:
        lat = r["latencies_ms"] or {}
        _out(f"watchers={r['watchers']:>3}  ingest {r['rate']:>10,.0f} ev/s  ({r['rate'] / base:.3f} of 0 watchers)"
             f"  ack p99 {r['ack_ms']['p99']:8.1f} ms  delivery p50 {lat.get('p50', float('nan')):8.1f} ms"
             f"  p99 {lat.get('p99', float('nan')):8.1f} ms  complete={r['complete']}")
        fields.append(f"rate_{r['watchers']}={r['rate']:.0f}")
    for r in results:
        if r["latencies_ms"]:
            fields.append(f"p99_ms_{r['watchers']}={r['latencies_ms']['p99']}")
    ten = next((r["rate"] for r in results if r["watchers"] == 10), float("nan"))
    fields += [f"offered={args.rate:.0f}", f"complete={all(r['complete'] for r in results)}",
               f"ratio={ten / base:.3f}"]
    _out(" ".join(fields))


if __name__ == "__main__":
    main()
