"""What the load benchmarks share: a ``nissa-server`` process over any ``--db`` (a SQLite file or a PostgreSQL
URL, of this checkout or another), streams of metric events, and probes of what a load must not slow: ``/healthz``
and a trainer's acks, each every 50 ms, the server's memory and CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import msgspec
from websockets.asyncio.client import ClientConnection, connect

from bench.processes import stop_process
from leyline import Metrics, encode, make_event
from leyline.frames import EventBatch, Hello

ROOT = pathlib.Path(__file__).resolve().parents[1]
SECRET = "load-bench-secret-" + "0" * 24
_ack = msgspec.json.Decoder(dict)


def cpu_seconds(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def p99(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[98]


@contextlib.contextmanager
def server(db: str, code: pathlib.Path = ROOT, *flags: str) -> Iterator[tuple[str, int]]:
    """``nissa-server`` of the checkout ``code`` over ``db`` on a free port: (URL, pid)."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from nissa_server.cli import main; sys.exit(main())",
                             "--host", "127.0.0.1", "--port", "0", "--db", db, "--log-level", "warning", *flags],
                            cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"(http://\S+)", line)
    if found is None:
        proc.kill()
        raise RuntimeError(f"the server at {code} did not start: {line!r}")
    try:
        yield found.group(1), proc.pid
    finally:
        stop_process(proc, 30)


def metric_batch(run_id: str, labels: list[int], steps: list[int], start: int) -> str:
    """A frame of ``loss`` events labelled ``i`` (one a label and step), seqs from ``start``."""
    return encode(EventBatch(events=[
        make_event(Metrics(values={"loss": (i * 7919 % 1000) / 997 + step / 1e4}, labels={"i": str(i)}), run_id=run_id,
                   seq=start + k, ts=1.7e9 + start + k, step=step, epoch=0)
        for k, (i, step) in enumerate(zip(labels, steps, strict=True))])).decode()


@contextlib.asynccontextmanager
async def ingest(url: str, run_id: str) -> AsyncIterator[ClientConnection]:
    """An ingest connection of ``run_id``, past its hello."""
    async with connect(url.replace("http", "ws") + "/ws/ingest", max_size=None, open_timeout=60) as ws:
        await ws.send(encode(Hello(run_id=run_id, name=run_id, secret=SECRET)).decode())
        await ws.recv()
        yield ws


async def acked(ws: ClientConnection, seq: int) -> None:
    """Until the server acks ``seq``."""
    while True:
        frame = _ack.decode(await ws.recv())
        if frame.get("type") == "ack" and frame["seq"] >= seq:
            return


class Probes:
    """``/healthz`` and a trainer's ack, each every 50 ms, for as long as it runs: their latencies."""

    def __init__(self, url: str, http: httpx.AsyncClient, run_id: str) -> None:
        self.url, self.http, self.run_id = url, http, run_id
        self.healthz: list[float] = []
        self.acks: list[float] = []
        self._stop = asyncio.Event()

    async def _health(self) -> None:
        while not self._stop.is_set():
            began = time.perf_counter()
            await self.http.get("/healthz")
            self.healthz.append(time.perf_counter() - began)
            await asyncio.sleep(0.05)

    async def _ingest(self) -> None:
        async with ingest(self.url, self.run_id) as ws:
            seq = 0
            while not self._stop.is_set():
                seq += 1
                began = time.perf_counter()
                await ws.send(metric_batch(self.run_id, [0], [seq], seq))
                await acked(ws, seq)
                self.acks.append(time.perf_counter() - began)
                await asyncio.sleep(0.05)

    def figures(self, prefix: str = "") -> dict[str, float]:
        """p99 and max of each probe, in ms."""
        out = {}
        for name, seen in (("healthz", self.healthz), ("ack", self.acks)):
            out[f"{prefix}{name}_p99_ms"], out[f"{prefix}{name}_max_ms"] = p99(seen) * 1000, max(seen, default=0) * 1000
        return out

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Probes]:
        tasks = [asyncio.create_task(self._health()), asyncio.create_task(self._ingest())]
        await asyncio.sleep(0.5)
        self.healthz.clear()
        self.acks.clear()
        try:
            yield self
        finally:
            self._stop.set()
            await asyncio.gather(*tasks)


@contextlib.asynccontextmanager
async def probing(url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Probes]]:
    """A client of ``url`` and ``Probes`` running on it (a run of their own each time)."""
    async with httpx.AsyncClient(base_url=url, timeout=600) as http, \
            Probes(url, http, f"probe-{time.time_ns()}").running() as probes:
        yield http, probes


async def subprocess_figures(*args: str) -> list[float]:
    """This script run again as a subprocess (a load of its own, off the probes' event loop): the numbers of
    its last line of output."""
    proc = await asyncio.create_subprocess_exec(sys.executable, *args, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    assert proc.returncode == 0, f"{args[:2]} failed"
    return [float(v) for v in out.decode().strip().splitlines()[-1].split()]
