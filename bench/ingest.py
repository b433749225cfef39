"""Sustained ingest: events/s from a NissaHub through nissa-server into SQLite, one watcher attached.

The hub streams to a ``nissa-server`` subprocess; the watcher is a ``/ws/watch`` client in its
own process, as ``esper-watch`` would be. Payloads are built before the clock starts (that is
the trainer's work, not the hub's). The stored figure runs from the first ``emit`` until the
server has acknowledged the last event as stored; the watched one until the watcher has it.

Baselines, in the same invocation, with the same events sent by a sync websockets client to a
bare asyncio websockets sink in its own process that parses nothing:

- raw frame throughput: one event per websocket frame, what loopback carries message by
  message; ``ratio=`` is the stored figure against this one;
- raw byte throughput: the same ``BATCH``-event frames the hub sends, only acknowledged;
  ``ratio_batch=`` is against this one (the transport's ceiling, with nothing done per event).

    python bench/ingest.py [--events 500000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import msgspec
from processes import stop_process  # bench/ is the script's directory
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from leyline import RunStarted
from leyline.esper import EpochCompleted, SlotSnapshot
from leyline.frames import CLOSE_LAGGING
from nissa.hub import HubConfig, NissaHub

BATCH = 2000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} did not start")


class Server:
    """``nissa-server`` as a subprocess on a free loopback port, stopped when the block ends."""

    def __init__(self, db: pathlib.Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        exe = shutil.which("nissa-server", path=os.path.dirname(sys.executable)) or "nissa-server"
        self.proc = subprocess.Popen([exe, "--host", "127.0.0.1", "--port", str(self.port), "--db", str(db)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_http(f"{self.url}/healthz", self.proc, "nissa-server")

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        stop_process(self.proc)


class _Stamp(msgspec.Struct):
    seq: int
    ts: float


class _Frame(msgspec.Struct):
    events: list[_Stamp] = []
    cursor: int = 0


class Watcher:
    """A ``/ws/watch`` client thread: tracks the highest seq received; ``on_event(seq, ts, arrival)``.

    Like any watcher that falls too far behind, it is closed as lagging (4408) and resumes
    from its cursor; ``resumes`` counts those.
    """

    def __init__(self, url: str, run_id: str, on_event: Callable[[int, float, float], None] | None = None) -> None:
        self._base = url.replace("http://", "ws://") + f"/ws/watch?run_id={run_id}"
        self.count = 0
        self.last_seq = 0
        self.resumes = 0
        self._cursor: int | None = None
        self._conn = None
        self._closing = False
        self._connected = threading.Event()
        self._on_event = on_event
        self._dec = msgspec.json.Decoder(_Frame)
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-watcher")
        self._thread.start()
        if not self._connected.wait(30):
            raise RuntimeError("the watcher could not connect")

    def _run(self) -> None:
        while not self._closing:
            cursor = "&after_seq=0" if self._cursor is None else f"&after_id={self._cursor}"
            try:
                with connect(self._base + cursor, proxy=None, compression=None, max_size=None,
                             open_timeout=10) as conn:
                    self._conn = conn
                    self._connected.set()
                    self._receive(conn)
            except ConnectionClosed as err:
                if self._closing or err.rcvd is None or err.rcvd.code != CLOSE_LAGGING:
                    return
            self.resumes += 1

    def _receive(self, conn) -> None:
        while True:
            raw = conn.recv()
            now = time.time()
            frame = self._dec.decode(raw)
            for e in frame.events:
                if self._on_event is not None:
                    self._on_event(e.seq, e.ts, now)
                self.last_seq = max(self.last_seq, e.seq)
                self.count += 1
            self._cursor = frame.cursor or self._cursor

    def wait_seq(self, seq: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.last_seq < seq and time.monotonic() < deadline:
            time.sleep(0.0005)
        return self.last_seq >= seq

    def close(self) -> None:
        self._closing = True
        if self._conn is not None:
            self._conn.close()
        self._thread.join(5)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the raw baseline -----------------------------------------------------------------------------


def _raw_sink(port: int, ack_every: int) -> None:
    """A bare websocket server: answers every ``ack_every``-th frame with a tiny ack, parses nothing."""
    from websockets.asyncio.server import serve

    async def handler(ws) -> None:
        n = 0
        async for _ in ws:
            n += 1
            if n % ack_every == 0:
                await ws.send('{"type":"ack"}')

    async def main() -> None:
        async with serve(handler, "127.0.0.1", port, compression=None, max_size=None):
            await asyncio.Future()

    asyncio.run(main())


def raw_events_per_s(frames: list[bytes], events: int, ack_every: int = 1) -> float:
    """Events/s through a bare sink in another process; ``len(frames)`` must divide by ``ack_every``."""
    port = free_port()
    sink = subprocess.Popen([sys.executable, __file__, "--raw-sink", str(port), str(ack_every)])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = connect(f"ws://127.0.0.1:{port}", proxy=None, compression=None, max_size=None)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with conn:
            acks = threading.Thread(target=lambda: [conn.recv() for _ in range(len(frames) // ack_every)],
                                    daemon=True)
            t0 = time.perf_counter()
            acks.start()
            for frame in frames:
                conn.send(frame, text=True)
            acks.join(120)
            if acks.is_alive():
                raise RuntimeError("the raw sink stopped acknowledging")
            return events / (time.perf_counter() - t0)
    finally:
        sink.kill()
        sink.wait()


def raw_baselines(lines: list[bytes]) -> tuple[float, float]:
    """(one event per frame, ``BATCH`` events per frame): the same events as bare frames."""
    lines = lines[:len(lines) // BATCH * BATCH]
    one = [b'{"type":"events","events":[' + line + b"]}" for line in lines]
    batched = [b'{"type":"events","events":[' + b",".join(lines[i:i + BATCH]) + b"]}"
               for i in range(0, len(lines), BATCH)]
    return raw_events_per_s(one, len(lines), ack_every=BATCH), raw_events_per_s(batched, len(lines))


# --- the hub through the server ------------------------------------------------------------------


def _payload(i: int) -> EpochCompleted:
    return EpochCompleted(round=i // 1000, accuracy=0.5, val_loss=1.25, train_loss=1.3, reward=0.01,
                          action="WAIT", seeds=[SlotSnapshot(slot="r0c0"), SlotSnapshot(slot="r0c1")])


class WatcherProcess:
    """A ``Watcher`` in its own process, as ``esper-watch`` would be: it shares no GIL with the hub."""

    def __init__(self, url: str, run_id: str, from_seq: int) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--watch", url, run_id, str(from_seq)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout is None or self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the watcher process could not connect")

    def result(self, last_seq: int, timeout: float) -> tuple[bool, float, int, float]:
        """(got up to ``last_seq``, unix time that seq arrived, lagging resumes, CPU seconds)."""
        try:
            out, _ = self.proc.communicate(f"{last_seq}\n", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return False, 0.0, 0, 0.0
        ok, arrived, resumes, cpu = out.split()
        return ok == "1", float(arrived), int(resumes), float(cpu)


def _watch_main(url: str, run_id: str, from_seq: int) -> None:
    """Child side of ``WatcherProcess``: arrival times of seqs from ``from_seq`` (the last few)."""
    arrivals: dict[int, float] = {}

    def on_event(seq: int, _ts: float, now: float) -> None:
        if seq >= from_seq:
            arrivals.setdefault(seq, now)

    watcher = Watcher(url, run_id, on_event=on_event)
    cpu0 = time.process_time()  # from here: the live stream, not the imports and the connect
    print("ready", flush=True)
    last_seq = int(sys.stdin.readline())
    ok = watcher.wait_seq(last_seq, timeout=300)
    cpu = time.process_time() - cpu0
    watcher.close()
    print(int(ok), arrivals.get(last_seq, 0.0), watcher.resumes, cpu, flush=True)


def hub_through_server(root: pathlib.Path, events: int) -> tuple[float, float, int, pathlib.Path]:
    with Server(root / "nissa.db") as server:
        hub = NissaHub(HubConfig(run_id="ingest", log_dir=root, server=server.url, queue_size=events * 2,
                                 batch_events=BATCH, window_events=200_000)).start()
        hub.emit(RunStarted(name="ingest", config={}), step=0, epoch=0)
        hub.flush(timeout=30)
        watcher = WatcherProcess(server.url, "ingest", from_seq=events + 1)
        payloads = [_payload(i) for i in range(events)]  # the trainer's work, not the hub's: off the clock
        server_cpu0, own_cpu0 = cpu_seconds(server.proc.pid), time.process_time()
        t0, wall0 = time.perf_counter(), time.time()
        for i, payload in enumerate(payloads):
            hub.emit(payload, step=i, epoch=i // 1000)
        report = hub.flush(timeout=300)
        stored_s = time.perf_counter() - t0
        server_cpu, own_cpu = cpu_seconds(server.proc.pid) - server_cpu0, time.process_time() - own_cpu0
        ok, arrived, resumes, watcher_cpu = watcher.result(report.logged, timeout=300)
        watched_s = arrived - wall0
        def cpu(seconds: float) -> str:
            return f"{seconds:.1f} s ({seconds / events * 1e6:.1f} us/event)"

        print(f"CPU until stored ({stored_s:.1f} s wall): nissa-server {cpu(server_cpu)}, "
              f"hub (worker + sender) {cpu(own_cpu)}; watcher until it had the last event {cpu(watcher_cpu)}")
        hub.close(timeout=10)
        # flush waits for what was logged when it was called; a heartbeat may be logged after that,
        # so acked may trail logged. The watcher waited for the last logged seq.
        if report.pending or report.lost or report.dropped or report.acked <= events or not ok:
            raise RuntimeError(f"incomplete: {report}, watcher got everything: {ok}")
        return events / stored_s, events / watched_s, resumes, hub.log_path


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--raw-sink", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--watch", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.events < BATCH:
        parser.error(f"--events must be at least {BATCH}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    if args.raw_sink:
        _raw_sink(*args.raw_sink)
        return 0
    if args.watch:
        _watch_main(args.watch[0], args.watch[1], int(args.watch[2]))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        stored, watched, resumes, log = hub_through_server(root, args.events)
        lines = log.read_bytes().splitlines()[1:]
        raw_frames, raw_bytes = raw_baselines(lines)
    size = sum(len(x) for x in lines) / max(1, len(lines))
    print(f"hub -> server -> sqlite (acked): {stored:10,.0f} events/s")
    print(f"hub -> server -> watcher:       {watched:10,.0f} events/s  (watcher resumed {resumes}x after lagging)")
    print(f"raw websocket frames, loopback: {raw_frames:10,.0f} events/s  (one {size:.0f}-byte event per frame)")
    print(f"raw websocket bytes, loopback:  {raw_bytes:10,.0f} events/s  ({BATCH} events per frame, no parsing)")
    print(f"events={args.events} stored_events_per_s={stored:.0f} watched_events_per_s={watched:.0f} "
          f"raw_frame_events_per_s={raw_frames:.0f} raw_batch_events_per_s={raw_bytes:.0f} "
          f"bytes_per_event={size:.0f} watcher_resumes={resumes} ratio={stored / raw_frames:.3f} "
          f"ratio_batch={stored / raw_bytes:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
