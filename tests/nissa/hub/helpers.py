"""Reading a hub's run log back in tests."""

from __future__ import annotations

import contextlib
import pathlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

from leyline import Event, EventKind, Kind, decode_event, decode_frame
from leyline.frames import Ack, EventBatch


def read_log(path: pathlib.Path) -> list[Event]:
    return [decode_event(line) for line in pathlib.Path(path).read_bytes().splitlines()]


def kinds(events: list[Event]) -> list[Kind]:
    return [e.kind for e in events]


def dropped_reported(events: list[Event]) -> dict[str, int]:
    """Sum of every ``events_dropped`` report in the log, per kind."""
    total: dict[str, int] = {}
    for e in events:
        if e.kind is EventKind.EVENTS_DROPPED:
            for k, n in e.payload.counts.items():
                total[k] = total.get(k, 0) + n
    return total


def ack_until_closed(conn: ServerConnection) -> None:
    """A server's side of a session after its welcome: acknowledge every batch of events, until the hub leaves."""
    try:
        while True:
            frame = decode_frame(conn.recv())
            if isinstance(frame, EventBatch) and frame.events:
                conn.send(msgspec.json.encode(Ack(seq=frame.events[-1].seq)).decode())
    except ConnectionClosed:
        return


@contextlib.contextmanager
def serving(handler: Callable[[ServerConnection], None], **options: Any) -> Iterator[str]:
    """A websocket server on 127.0.0.1 answering each connection with ``handler`` in a thread; yields its URL, shuts
    it down on exit (after the block: a handler still waiting is released by the block itself)."""
    with serve(handler, "127.0.0.1", 0, **options) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.socket.getsockname()[1]}"
        finally:
            server.shutdown()
    thread.join(10)
