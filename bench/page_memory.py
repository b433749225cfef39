"""What reading a run of big events costs the server's memory: a page is bounded by bytes, not only count.

    python bench/page_memory.py [--events 600] [--config-kb 250] [--reads 3]

Stores ``--events`` events with a ``--config-kb`` configuration each (the largest events a trainer may
send are 256 KiB), then reads ``GET /runs/{id}/events?limit=10000`` ``--reads`` times and reports the
server's resident memory before and after (from ``/proc``), and what one page held. Ends with one line
of ``key=value`` pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import shutil
import subprocess
import sys
import tempfile

import httpx
from ingest import free_port  # bench/ is the script's directory
from websockets.asyncio.client import connect

from leyline import RunStarted, encode, make_event
from leyline.frames import EventBatch, Hello


def _rss_mb(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _store(url: str, n: int, config_kb: int) -> None:
    blob = "x" * (config_kb * 1024)
    async with connect(url.replace("http", "ws") + "/ws/ingest", max_size=None) as ws:
        await ws.send(encode(Hello(run_id="big", secret="b" * 43)).decode())
        await ws.recv()
        for first in range(1, n + 1, 10):
            events = [make_event(RunStarted(name="big", config={"blob": blob}), run_id="big", seq=seq, ts=1.7e9)
                      for seq in range(first, min(first + 10, n + 1))]
            await ws.send(encode(EventBatch(events=events)).decode())
        while f'"seq":{n}' not in str(await ws.recv()).replace(" ", ""):
            pass


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=600)
    p.add_argument("--config-kb", type=int, default=250)
    p.add_argument("--reads", type=int, default=3)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="nissa-pages-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([shutil.which("nissa-server", path=str(pathlib.Path(sys.executable).parent)) or
                               "nissa-server", "--port", str(port), "--db", str(tmp / "n.db"),
                               "--log-level", "warning"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and "listening" in server.stdout.readline()
        asyncio.run(_store(url, args.events, args.config_kb))
        before = _rss_mb(server.pid)
        sizes, counts = [], []
        for _ in range(args.reads):
            resp = httpx.get(f"{url}/runs/big/events", params={"limit": 10000}, timeout=120)
            sizes.append(len(resp.content))
            counts.append(len(resp.json()))
        after = _rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    stored_mb = args.events * args.config_kb / 1024
    print(f"stored_mb={stored_mb:.0f} page_events={counts[0]} page_mb={sizes[0] / 2**20:.1f} "
          f"rss_before_mb={before:.0f} rss_after_mb={after:.0f} rss_growth_mb={after - before:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
