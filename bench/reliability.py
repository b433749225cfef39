"""What a live run keeps through a crashed server and a flood of requests, with the real console scripts.

    python bench/reliability.py [--rounds 8] [--burst 2000]

A ``nissa-server`` (SQLite, with a token) and an ``esper-train`` run against it. While the run is live:
``--burst`` escalations at once (``--max-open-commands`` 8 lets 8 through; the rest must be 429), then a
round of hostile requests (the largest cursors, pages of every size, methods a path does not serve,
uploads without the run's secret, deletes of a live run), and ``--silent`` websockets that never say hello
(past the 1,000-connection cap) before ``/healthz`` and a new ingest connection. Then the server
is killed with SIGKILL, restarted on the same database and port, and the run goes on to its end: every
event of its log must be stored exactly once. Ends with one line of ``key=value`` pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import httpx
from ingest import free_port  # bench/ is the script's directory
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from leyline import encode
from leyline.frames import Hello

TOKEN = "reliability-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MAX_INT = 2**63 - 1


def _script(name: str) -> str:
    return shutil.which(name, path=str(pathlib.Path(sys.executable).parent)) or name


def _server(db: pathlib.Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([_script("nissa-server"), "--port", str(port), "--db", str(db), "--token", TOKEN,
                             "--log-level", "warning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        raise SystemExit(f"nissa-server did not start: {line}{proc.stderr.read() if proc.stderr else ''}")
    return proc


def _stored(url: str, run_id: str) -> list[int]:
    seqs, params = [], {"limit": 10000, "rank": 0}
    while page := httpx.get(f"{url}/runs/{run_id}/events", params=params, headers=AUTH, timeout=30).json():
        seqs += [e["seq"] for e in page]
        params["after_seq"] = page[-1]["seq"]
    return seqs


async def _burst(url: str, run_id: str, n: int, codes: collections.Counter) -> None:
    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=60, limits=limits) as http:
        body = {"run_id": run_id, "action": "debug", "epochs": 1}
        for start in range(0, n, 100):  # 100 at a time: more waiting on httpx's pool costs the client dearly
            for resp in await asyncio.gather(*(http.post("/escalate", json=body) for _ in range(min(100, n - start)))):
                codes[resp.status_code] += 1


async def _hostile(url: str, run_id: str, codes: collections.Counter) -> None:
    probes = [("GET", f"/runs/{run_id}/events", {"after_seq": MAX_INT, "after_rank": -1}, None),
              ("GET", f"/runs/{run_id}/events", {"after_seq": MAX_INT, "kind": "anomaly_detected"}, None),
              ("GET", f"/runs/{run_id}/events", {"limit": 10000, "rank": 65535}, None),
              ("POST", f"/runs/{run_id}", {}, None), ("DELETE", f"/runs/{run_id}/artifacts/t.json", {}, None),
              ("PUT", f"/runs/{run_id}/artifacts/t.json", {}, b"forged"), ("DELETE", f"/runs/{run_id}", {}, None),
              ("GET", f"/runs/{run_id}/artifacts/..%2F..%2Fetc%2Fpasswd", {}, None),
              ("POST", "/escalate", {}, b'{"run_id": "' + run_id.encode() + b'", "action": "debug", "epochs": 1e99}')]
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=60) as http:
        for method, path, params, body in probes:
            codes[(await http.request(method, path, params=params, content=body)).status_code] += 1



async def _flood(url: str, n: int, codes: collections.Counter) -> tuple[float, bool]:
    """``n`` websockets that never say hello (past the connection cap), then /healthz and a new ingest
    connection: (seconds /healthz took, whether the newcomer was welcomed)."""
    silent = []
    for _ in range(n):
        try:
            silent.append(await connect(url.replace("http", "ws") + "/ws/ingest", additional_headers=AUTH,
                                        open_timeout=30))
        except (OSError, InvalidStatus) as err:  # a displaced one's handshake, or a 503 at the cap
            codes[getattr(getattr(err, "response", None), "status_code", 0)] += 1
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=60) as http:
        began = time.perf_counter()
        resp = await http.get("/healthz")
        took = time.perf_counter() - began
        codes[resp.status_code] += 1
    async with connect(url.replace("http", "ws") + "/ws/ingest", additional_headers=AUTH) as ws:
        await ws.send(encode(Hello(run_id="flood-newcomer", secret="n" * 43, upload=True)).decode())
        welcomed = '"welcome"' in str(await asyncio.wait_for(ws.recv(), 30))
    for ws in silent:
        with contextlib.suppress(OSError, ConnectionClosed):
            await ws.close()
    return took, welcomed


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--burst", type=int, default=2000)
    p.add_argument("--silent", type=int, default=1100, help="websockets that never say hello (default %(default)s)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="nissa-reliability-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = _server(tmp / "nissa.db", port)
    env = {**os.environ, "NISSA_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    trainer = subprocess.Popen([_script("esper-train"), "--server", url, "--log-dir", str(tmp / "runs"),
                                "--run-name", "reliability", "--rounds", str(args.rounds), "--policy", "heuristic",
                                "--log-every", "0"], stdout=subprocess.PIPE, stderr=(tmp / "trainer.log").open("w"),
                               text=True, env=env)
    codes: collections.Counter = collections.Counter()
    log = ""
    try:
        assert trainer.stdout is not None
        run_id = next(line.split(": ", 1)[1].strip() for line in trainer.stdout if line.startswith("run id: "))
        while len(_stored(url, run_id)) < 20:
            time.sleep(0.2)
        asyncio.run(_burst(url, run_id, args.burst, codes))
        commands = len(httpx.get(f"{url}/runs/{run_id}/commands", headers=AUTH, timeout=30).json())
        asyncio.run(_hostile(url, run_id, codes))
        healthz_s, welcomed = asyncio.run(_flood(url, args.silent, codes))
        stored_before = len(_stored(url, run_id))
        server.kill()  # SIGKILL: no shutdown code runs
        server.wait()
        log = server.stderr.read() if server.stderr else ""
        time.sleep(2.0)  # the run goes on logging while no server answers
        server = _server(tmp / "nissa.db", port)
        trainer.wait(timeout=900)
        logged = (tmp / "runs" / run_id / "events.jsonl").read_bytes().count(b"\n")
        seqs = _stored(url, run_id)
    finally:
        trainer.kill()
        server.terminate()
        server.wait()
    errors = sum(n for code, n in codes.items() if code >= 500)
    log += server.stderr.read() if server.stderr else ""
    print(f"responses: {dict(sorted(codes.items()))}; stored before the kill: {stored_before}")
    print(f"events_logged={logged} events_stored={len(seqs)} lost={len(set(range(1, logged + 1)) - set(seqs))} "
          f"duplicated={len(seqs) - len(set(seqs))} escalations={args.burst} accepted={codes[202]} "
          f"rejected_429={codes[429]} commands={commands} server_5xx={errors} tracebacks={log.count('Traceback')} "
          f"silent_sockets={args.silent} healthz_ms={healthz_s * 1000:.0f} newcomer_welcomed={int(welcomed)}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
