"""A trainer's stream, as the benchmarks play it: events due at a steady rate, sent over ``/ws/ingest`` in
frames gathered as a NissaHub gathers them (``nissa.hub.pacing.Gathering``, the hub's own rule), without
the hub's log and threads, so that hundreds of them fit in one process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from leyline import encode, make_event
from leyline.esper import EpochCompleted, SlotSnapshot
from leyline.frames import Hello
from nissa.hub.config import HubConfig
from nissa.hub.pacing import Gathering

SECRET = "lab-bench-stream-secret-" + "0" * 20


_SPLICED = {"seq": "987654321", "ts": "1234567890.5", "step": "555444333", "accuracy": "0.1111", "val_loss": "0.2222",
            "train_loss": "0.3333", "reward": "0.4444"}
"""The fields each event gets its own value of, and the value the encoded template holds in their place."""


def _values(seq: int, t0: float, rate: int) -> dict[str, str]:
    """Event ``seq``'s values: due at its moment, a step of its own, losses and accuracy that move."""
    return {"seq": str(seq), "ts": repr(t0 + (seq - 1) / rate), "step": str(seq), "accuracy": repr((seq % 1000) / 1000),
            "val_loss": repr(1 + (seq % 997) / 1000), "train_loss": repr(1 + (seq % 991) / 1000),
            "reward": repr((seq % 13) / 100)}


def frame_maker(run_id: str, t0: float, rate: int):
    """A function (first seq, count) -> an events frame: a real event encoded once, the fields of ``_SPLICED``
    spliced in per event, as a trainer's stream has them (every event a step of its own, its numbers
    moving: no column of a series row that holds one value for a second); each event is stamped with the
    moment it was due (emitted), so watcher latency includes the gathering."""
    payload = EpochCompleted(round=1, accuracy=0.1111, val_loss=0.2222, train_loss=0.3333, reward=0.4444,
                             action="WAIT", seeds=[SlotSnapshot(slot="r0c0"), SlotSnapshot(slot="r0c1")])
    body = encode(make_event(payload, run_id=run_id, seq=987654321, ts=1234567890.5, step=555444333,
                             epoch=1)).decode()
    order = sorted(_SPLICED, key=lambda name: body.index(_SPLICED[name]))
    pieces, rest = [], body
    for name in order:
        piece, found, rest = rest.partition(_SPLICED[name])
        assert found, name
        pieces.append(piece)
    pieces.append(rest)

    def one(seq: int) -> str:
        values = _values(seq, t0, rate)
        return "".join(p + values[name] for p, name in zip(pieces, order, strict=False)) + pieces[-1]

    def make(first: int, n: int) -> str:
        return '{"type":"events","events":[' + ",".join(one(s) for s in range(first, first + n)) + "]}"

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
