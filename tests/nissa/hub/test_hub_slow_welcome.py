"""A server slow to welcome (a loaded machine, a store slow to find the run) is not a server that is away: a
run that ends before its first connection is done still delivers everything at ``close``. A server that never
welcomes at all is given up once its attempt fails and the offline grace has passed, not the whole timeout."""

from __future__ import annotations

import threading
import time

import msgspec
from websockets.sync.server import ServerConnection

from leyline import decode_frame
from leyline.esper import EpochCompleted
from leyline.frames import Hello, Welcome
from nissa.hub import BackoffConfig, HubConfig, NissaHub

from .helpers import ack_until_closed, serving


def _slow_server(conn: ServerConnection, welcome_after_s: float) -> None:
    assert isinstance(decode_frame(conn.recv()), Hello)
    time.sleep(welcome_after_s)  # the hello is being handled: the connection is up, no answer yet
    conn.send(msgspec.json.encode(Welcome(last_seq=0, protocol=2)).decode())
    ack_until_closed(conn)


_OPTIONS = {"compression": None, "close_timeout": 0.5}


def _hub(tmp_path, url: str, **over) -> NissaHub:
    config = HubConfig(run_id="slow", log_dir=tmp_path, server=url, offline_grace_s=0.3,
                       backoff=BackoffConfig(initial_s=0.05, max_s=0.2), **over)
    return NissaHub(config).start()


def test_a_run_that_ends_while_its_welcome_is_slow_still_delivers_everything(tmp_path):
    with serving(lambda conn: _slow_server(conn, 2.0), **_OPTIONS) as url:
        hub = _hub(tmp_path, url, connect_timeout_s=30.0)
        for i in range(14):
            hub.emit(EpochCompleted(accuracy=0.5, val_loss=1.0), step=i, epoch=0)
        report = hub.close(timeout=60)  # begins while the welcome is still 2 s away, far past the 0.3 s grace
    assert report.complete and report.acked == report.logged >= 14, report


def test_a_server_that_never_welcomes_is_given_up_after_its_attempt_and_the_grace(tmp_path):
    never = threading.Event()

    def silent(conn: ServerConnection) -> None:
        never.wait(30)

    with serving(silent, **_OPTIONS) as url:
        hub = _hub(tmp_path, url, connect_timeout_s=1.0)
        hub.emit(EpochCompleted(accuracy=0.5, val_loss=1.0), step=0, epoch=0)
        began = time.monotonic()
        report = hub.close(timeout=120)
        took = time.monotonic() - began
        never.set()
    assert report.acked == 0 and report.unsent == report.logged >= 1, report
    assert took < 60, f"close waited {took:.0f} s for a server that never answers (its grace is 0.3 s)"
