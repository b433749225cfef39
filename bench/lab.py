"""A lab's load: many runs streaming at once and watchers following them, on SQLite and on PostgreSQL
side by side in one invocation.

Each backend gets a fresh database and a ``nissa-server`` subprocess. Producer processes stream
``--runs`` runs at ``--rate`` events/s each over ``/ws/ingest`` in frames gathered as a NissaHub gathers
them (for ``--batch-ms``, longer while two frames await their ack; see ``streams``), events of ~450 bytes
stamped with the moment they were due; a watcher process holds ``--watchers`` ``/ws/watch`` connections
(one follows every run, as a lab dashboard does; the others one run each). Producers and watchers are
separate processes; only the server's own CPU is counted. First, the floor: the same producers stream
into a bare websocket server (uvicorn with nissa-server's websocket implementation and options) that acks
each frame and drops it; its CPU per event is ``floor_us_per_event=``.

Figures per backend: stored/offered (events acknowledged as stored within a short drain after the
window, over the rate times the window), watcher delivery latency (arrival minus the moment the event was
due, p50/p99), server CPU microseconds per stored event, database bytes per stored event (and, on
PostgreSQL, the database processes' CPU per event). ``ratio=`` is the server's CPU per event on
PostgreSQL over SQLite's.

    python bench/lab.py [--runs 32] [--rate 1000] [--watchers 10] [--seconds 30] [--batch-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings

import msgspec
from ingest import cpu_seconds, free_port  # bench/ is the script's directory
from streams import child, child_result, stream
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from leyline.frames import CLOSE_LAGGING
from nissa.hub.config import HubConfig

DRAIN_S = 10.0


# --- the producer process --------------------------------------------------------------------------


def produce_main(url: str, runs: list[str], rate: int, seconds: float, batch_ms: float, t0: float,
                 drain: bool) -> None:
    async def main() -> list[dict]:
        return await asyncio.gather(*(stream(url, r, rate, seconds, t0, linger_s=batch_ms / 1000,
                                             drain_s=DRAIN_S if drain else 0.0) for r in runs))

    out = dict(zip(runs, asyncio.run(main()), strict=True))
    print(json.dumps(out), flush=True)


# --- the watcher process ---------------------------------------------------------------------------


class _Stamp(msgspec.Struct):
    ts: float


class _Frame(msgspec.Struct):
    events: list[_Stamp] = []
    cursor: int = 0


async def _follow(url: str, run_id: str | None, t0: float, end: float, lat: list[float], stats: dict) -> None:
    decode = msgspec.json.Decoder(_Frame).decode
    cursor = None
    while time.time() < end:
        query = ("?run_id=" + run_id if run_id else "?") + (f"&after_id={cursor}" if cursor is not None else "")
        try:
            async with connect(url.replace("http", "ws") + "/ws/watch" + query, max_size=None,
                               compression=None) as ws:
                while True:
                    raw = await asyncio.wait_for(ws.recv(), max(0.01, end - time.time()))
                    now = time.time()
                    frame = decode(raw)
                    cursor = frame.cursor
                    stats["events"] += len(frame.events)
                    lat.extend(now - e.ts for e in frame.events if e.ts >= t0)
        except TimeoutError:
            return
        except ConnectionClosed as err:
            if err.rcvd is None or err.rcvd.code != CLOSE_LAGGING:
                raise
            stats["resumes"] += 1


def watch_main(url: str, targets: list[str], t0: float, seconds: float) -> None:
    lat: list[float] = []
    stats = {"events": 0, "resumes": 0}
    end = t0 + seconds + DRAIN_S / 2

    async def main() -> None:
        await asyncio.gather(*(_follow(url, t or None, t0, end, lat, stats) for t in targets))

    asyncio.run(main())
    lat.sort()

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")

    print(json.dumps({**stats, "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": pct(1.0)}), flush=True)


# --- the floor: the same frames into a websocket server that does nothing with them -----------------


_FLOOR_ACK = f'{{"type":"ack","seq":{2**53}}}'


async def floor_app(scope: dict, receive, send) -> None:
    """An ASGI app that takes ingest connections, answers the hello, and acks and drops every frame unread."""
    if scope["type"] != "websocket":
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    await receive()  # the hello
    await send({"type": "websocket.send", "text": '{"type":"welcome","last_seq":0,"server_version":"floor"}'})
    while (await receive())["type"] == "websocket.receive":  # each frame acked at once, as if stored
        await send({"type": "websocket.send", "text": _FLOOR_ACK})


def floor_main(port: int) -> None:
    import uvicorn

    # The websocket implementation and options nissa-server runs on: only what it does with a frame differs.
    uvicorn.run(floor_app, host="127.0.0.1", port=port, log_config=None, lifespan="off", http="httptools",
                ws="websockets-sansio", ws_per_message_deflate=False, ws_max_size=1 << 24)


def _producers(url: str, runs: list[str], args: argparse.Namespace, t0: float, drain: bool) -> list[subprocess.Popen]:
    halves = [runs[: len(runs) // 2], runs[len(runs) // 2:]]
    return [child(__file__, "--produce-child", url, ",".join(h), str(args.rate), str(t0), str(args.seconds),
                  str(args.batch_ms), "1" if drain else "0") for h in halves if h]


def run_floor(args: argparse.Namespace) -> float:
    """Server CPU microseconds per event of the floor, fed by the same producers as the real server."""
    port = free_port()
    server = child(__file__, "--floor-child", str(port))
    try:
        _wait_port(port)
        runs = [f"lab-{i:03d}" for i in range(args.runs)]
        t0 = time.time() + 3.0
        producers = _producers(f"http://127.0.0.1:{port}", runs, args, t0, drain=False)
        cpu0 = cpu_seconds(server.pid)
        sent = sum(s["sent"] for proc in producers for s in child_result(proc, args.seconds + 60).values())
        return (cpu_seconds(server.pid) - cpu0) / max(1, sent) * 1e6
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


# --- the databases and the server ------------------------------------------------------------------


class Database:
    """Where one backend keeps its data: a SQLite file, or a database on a PostgreSQL of pgserver's."""

    def __init__(self, backend: str, root: pathlib.Path) -> None:
        self.backend, self.root = backend, root
        self.pg = None
        if backend == "sqlite":
            self.db = str(root / "lab.db")
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs on an unset XDG_RUNTIME_DIR
            import pgserver

            self.pg = pgserver.get_server(root / "pg", cleanup_mode="stop")
            self.db = self.pg.get_uri()

    def size(self) -> int:
        if self.pg is None:
            return sum(p.stat().st_size for p in self.root.glob("lab.db*") if p.is_file())
        import psycopg

        with psycopg.connect(self.db) as conn:
            return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])

    def cpu(self) -> float:
        """CPU seconds of the database's own processes (0 for SQLite: it runs inside the server)."""
        if self.pg is None:
            return 0.0
        root = int((self.root / "pg" / "postmaster.pid").read_text().split()[0])
        total = 0.0
        for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(stat.parent.name)
            if pid == root or int(fields[1]) == root:
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a process's main thread (the server's event loop) and of its other threads (the
    store's writer, readers, the listener)."""
    out: dict[str, float] = {}
    for stat in pathlib.Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        name = "event loop" if stat.parent.name == str(pid) else "other threads"
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out



def run_backend(backend: str, args: argparse.Namespace, root: pathlib.Path) -> dict:
    db = Database(backend, root)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    exe = [os.path.join(os.path.dirname(sys.executable), "nissa-server")]
    if args.profile:  # the server's event loop under cProfile (its writer thread is not profiled)
        exe = [sys.executable, "-m", "cProfile", "-o", f"{args.profile}.{backend}", "-m", "nissa_server.cli"]
    server = subprocess.Popen([*exe, "--port", str(port), "--db", db.db, "--artifact-dir", str(root / "art"),
                               "--max-watchers", str(args.watchers + 10)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None and "listening" in server.stdout.readline(), "nissa-server did not start"
        runs = [f"lab-{i:03d}" for i in range(args.runs)]
        size0, db_cpu0 = (db.size() if db.pg is not None else 0), db.cpu()  # a new SQLite file: all of it
        t0 = time.time() + 3.0  # every process connected by then
        targets = [""] + runs[: max(0, args.watchers - 1)]
        targets = (targets * args.watchers)[: args.watchers]
        common = [str(t0), str(args.seconds)]
        watcher = child(__file__, "--watch-child", url, ",".join(targets), *common)
        producers = _producers(url, runs, args, t0, drain=True)
        cpu0, threads0 = cpu_seconds(server.pid), thread_cpu(server.pid)
        streams: dict = {}
        for proc in producers:
            streams.update(child_result(proc, args.seconds + DRAIN_S + 60))
        cpu = cpu_seconds(server.pid) - cpu0
        threads = {name: t - threads0.get(name, 0.0) for name, t in thread_cpu(server.pid).items()}
        watched = child_result(watcher, args.seconds + DRAIN_S + 60)
        stored = sum(s["stored"] for s in streams.values())
        offered = sum(s["offered"] for s in streams.values())
        db_cpu = db.cpu() - db_cpu0
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)
    try:
        size = db.size() - size0  # with the server stopped: SQLite's WAL is checkpointed into the file
    finally:
        if db.pg is not None:
            db.pg.cleanup()
    return {"stored_ratio": stored / offered, "server_us_per_event": cpu / max(1, stored) * 1e6,
            "p50_ms": watched["p50_ms"], "p99_ms": watched["p99_ms"], "bytes_per_event": size / max(1, stored),
            "db_us_per_event": db_cpu / max(1, stored) * 1e6, "watcher_resumes": watched["resumes"],
            "stored": stored, "threads": {name: t / max(1, stored) * 1e6 for name, t in threads.items() if t > 0.05}}


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=32)
    parser.add_argument("--rate", type=int, default=1000, help="events/s per run")
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--batch-ms", type=float, default=HubConfig.send_linger_s * 1000,
                        help="how long a producer lets events gather into a frame (as a NissaHub's send_linger_s; "
                             "longer while a frame awaits its ack)")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--profile", metavar="PATH", help="write the server's cProfile to PATH.<backend>")
    parser.add_argument("--produce-child", nargs=7, help=argparse.SUPPRESS)
    parser.add_argument("--floor-child", nargs=1, help=argparse.SUPPRESS)
    parser.add_argument("--watch-child", nargs=4, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    if args.produce_child:
        url, runs, rate, t0, seconds, batch_ms, drain = args.produce_child
        produce_main(url, runs.split(","), int(rate), float(seconds), float(batch_ms), float(t0), drain == "1")
        return 0
    if args.floor_child:
        floor_main(int(args.floor_child[0]))
        return 0
    if args.watch_child:
        url, targets, t0, seconds = args.watch_child
        watch_main(url, targets.split(","), float(t0), float(seconds))
        return 0
    floor = run_floor(args)
    print(f"{'floor':>10}: {floor:.2f} us/event "
          "(the same streams into a websocket server that acks and drops each frame)", flush=True)
    results: dict[str, dict] = {}
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                results[backend] = r = run_backend(backend, args, pathlib.Path(tmp))
            except ImportError as err:  # pgserver missing: the other backend still runs
                print(f"{backend:>10}: unavailable ({err})", flush=True)
                continue
        print(f"{backend:>10}: stored/offered {r['stored_ratio']:.4f}  watcher p50 {r['p50_ms']:.1f} ms  "
              f"p99 {r['p99_ms']:.1f} ms  server {r['server_us_per_event']:.2f} us/event  "
              f"database {r['db_us_per_event']:.2f} us/event, {r['bytes_per_event']:.0f} bytes/event  "
              f"({r['stored']:.0f} events, watcher resumes {r['watcher_resumes']:.0f})", flush=True)
        print(" " * 12 + "server threads, us/event: " + ", ".join(
            f"{name} {us:.2f}" for name, us in sorted(r["threads"].items(), key=lambda kv: -kv[1])), flush=True)
    pairs = [f"runs={args.runs}", f"rate={args.rate}", f"watchers={args.watchers}", f"seconds={args.seconds:g}",
             f"batch_ms={args.batch_ms:g}", f"floor_us_per_event={floor:.4g}"]
    for backend, r in results.items():
        pairs += [f"{key}_{backend}={r[key]:.4g}" for key in ("stored_ratio", "server_us_per_event", "p99_ms",
                                                                "bytes_per_event", "db_us_per_event")]
    if {"sqlite", "postgresql"} <= set(results):
        ratio = results["postgresql"]["server_us_per_event"] / results["sqlite"]["server_us_per_event"]
        pairs.append(f"ratio={ratio:.3f}")
    print(" ".join(pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
