"""A trainer's stream, as the benchmarks play it: events due at a steady rate, sent over ``/ws/ingest`` in
frames gathered as a NissaHub gathers them (``nissa.hub.sender.Gathering``, the hub's own rule), without
the hub's log and threads, so that hundreds of them fit in one process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from leyline import EpochCompleted, SlotSnapshot, encode, make_event
from leyline.frames import Hello
from nissa.hub.config import HubConfig
from nissa.hub.sender import Gathering

SECRET = "lab-bench-stream-secret-" + "0" * 20


def frame_maker(run_id: str, t0: float, rate: int):
    """A function (first seq, count) -> an events frame: a real event encoded once, seq and ts spliced; each
    event is stamped with the moment it was due (emitted), so watcher latency includes the gathering."""
    payload = EpochCompleted(round=1, accuracy=0.5, val_loss=1.25, train_loss=1.3, reward=0.01, action="WAIT",
                             seeds=[SlotSnapshot(slot="r0c0"), SlotSnapshot(slot="r0c1")])
    body = encode(make_event(payload, run_id=run_id, seq=987654321, ts=1234567890.5, step=7, epoch=1)).decode()
    a, _, b = body.partition("987654321")
    b, _, c = b.partition("1234567890.5")

    def make(first: int, n: int) -> str:
        return '{"type":"events","events":[' + ",".join(
            a + str(s) + b + repr(t0 + (s - 1) / rate) + c for s in range(first, first + n)) + "]}"

    return make


async def _send_as_a_hub(ws, make, rate: int, total: int, t0: float, linger_s: float, acked: dict,
                         acks: asyncio.Event) -> None:
    gathering = Gathering(HubConfig.batch_events, linger_s, HubConfig.send_hold_s)
    sent = 0
    while sent < total:
        due = min(total, int((time.time() - t0) * rate))
        if due == sent:
            await asyncio.sleep(max(0.001, t0 + (sent + 1) / rate - time.time()))
            continue
        wait = gathering.wait_s(due - sent, acked["seq"])
        if wait > 0:
            acks.clear()
            try:
                async with asyncio.timeout(wait):
                    await acks.wait()
            except TimeoutError:
                pass
            continue
        await ws.send(make(sent + 1, due - sent))
        sent = acked["sent"] = due
        gathering.sent(due)


async def stream(url: str, run_id: str, rate: int, seconds: float, t0: float, *, linger_s: float,
                 drain_s: float) -> dict:
    """Stream ``rate * seconds`` events from ``t0``; then wait up to ``drain_s`` for the last ack. Returns
    what was offered, sent and acknowledged as stored, and why the server dropped the connection (or None)."""
    make = frame_maker(run_id, t0, rate)
    total = int(rate * seconds)
    acked = {"seq": 0, "sent": 0}
    acks = asyncio.Event()
    dropped = None
    try:
        async with connect(url.replace("http", "ws") + "/ws/ingest", max_size=None, compression=None,
                           open_timeout=60, ping_interval=None) as ws:
            await ws.send(encode(Hello(run_id=run_id, name=run_id, secret=SECRET)).decode())
            await ws.recv()  # welcome

            async def read_acks() -> None:
                async for raw in ws:
                    frame = json.loads(raw)
                    if frame.get("type") == "ack" and frame["seq"] > acked["seq"]:
                        acked["seq"] = frame["seq"]
                        acks.set()

            reader = asyncio.create_task(read_acks())
            await asyncio.sleep(max(0.0, t0 - time.time()))
            sender = asyncio.create_task(_send_as_a_hub(ws, make, rate, total, t0, linger_s, acked, acks))
            await asyncio.wait([sender, reader], return_when=asyncio.FIRST_COMPLETED)
            if not sender.done():  # the reader ended first: the server closed the connection
                dropped = f"closed {ws.close_code}"
            else:
                sender.result()
                deadline = time.time() + drain_s
                while acked["seq"] < acked["sent"] and time.time() < deadline and not reader.done():
                    acks.clear()
                    try:
                        async with asyncio.timeout(max(0.0, deadline - time.time())):
                            await acks.wait()
                    except TimeoutError:
                        pass
            sender.cancel()
            if reader.done():
                reader.result()  # a close by the server raises here
            reader.cancel()
    except ConnectionClosed as err:
        dropped = str(err.rcvd.code) if err.rcvd else "no close frame"
    except OSError as err:
        dropped = f"connect: {err}"
    return {"offered": total, "sent": acked["sent"], "stored": min(acked["seq"], acked["sent"]), "dropped": dropped}


def child(script: str, *args: str) -> subprocess.Popen:
    """``script`` (a benchmark playing one of its parts) in a process of its own; its stdout piped."""
    return subprocess.Popen([sys.executable, script, *args], stdout=subprocess.PIPE, text=True)


def child_result(proc: subprocess.Popen, timeout: float) -> dict:
    """The JSON line a child prints last."""
    out, _ = proc.communicate(timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])
