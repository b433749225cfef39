"""A peer that welcomes the hub and then stops reading: emit stays free, memory stays bounded,
the stalled connection is dropped and retried, and close() still returns and says what is left."""

from __future__ import annotations

import threading
import time

import pytest

from leyline import encode
from leyline.esper import EpochCompleted, SeedGerminated
from leyline.frames import Welcome
from nissa.hub import BackoffConfig, HubConfig, NissaHub

from .helpers import read_log, serving


@pytest.fixture
def stalling_peer():
    """Answers hello with welcome(0), then never reads again (max_queue=1: TCP backs up)."""
    release = threading.Event()
    connections = []

    def handler(ws) -> None:
        connections.append(ws)
        ws.recv()
        ws.send(encode(Welcome(last_seq=0)).decode())
        release.wait()

    with serving(handler, max_queue=1, compression=None, max_size=None, close_timeout=0.5) as url:
        yield url, connections
        release.set()


def test_stalled_peer_neither_blocks_emit_nor_grows_memory(tmp_path, stalling_peer):
    url, connections = stalling_peer
    hub = NissaHub(HubConfig(run_id="stall", log_dir=tmp_path, server=url, queue_size=100_000, ack_timeout_s=1.0,
                             offline_grace_s=0.5, backoff=BackoffConfig(initial_s=0.05, max_s=0.2))).start()
    payload = EpochCompleted(accuracy=0.5, val_loss=1.0, action="x" * 200)
    emitted = 0
    for i in range(60_000):
        hub.emit(payload, step=i, epoch=0)
        emitted += 1
        if i % 1000 == 0:
            hub.emit(SeedGerminated(slot="r0c0", seed_id=f"s{i}", blueprint="b", params=1), step=i, epoch=0)
            assert len(hub._queue) <= 100_000 + 60  # bounded: only critical events may pass the limit
    hub.flush(timeout=60, delivered=False)  # logs everything (the acks never come); a loaded machine takes longer
    assert hub.stats.logged > 40_000, "a 100,000-event queue should have taken most of the burst"

    def reconnected() -> bool:
        return hub.stats.reconnects >= 1 and len(connections) >= 2

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not reconnected():
        time.sleep(0.1)
    assert reconnected(), f"the stalled connection was never dropped: {hub.stats}"
    assert hub.stats.sent > 0 and hub.stats.acked == 0
    assert "no ack" in (hub.stats.last_error or "")
    report = hub.close(timeout=3)
    events = read_log(hub.log_path)
    assert report.logged == len(events) and report.unsent == len(events) and report.pending == 0
    assert sum(1 for e in events if e.kind.value == "seed_germinated") == 60
    assert emitted == 60_000
