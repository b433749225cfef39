"""A histogram read costs what it returns (the shape of a model's every layer over steps, small): the steps are
chosen before anything is decoded, only events holding the name are read, and a read that would decode more
than the server's ``max_read_bytes`` is refused with the ``max_steps`` that fits."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import msgspec
import pytest

from leyline import EventKind, Severity, make_event
from leyline.codec import BatchEvent
from leyline.payloads_histogram import Distribution, Histograms, HistogramsReply
from nissa_server import histograms
from nissa_server.batches import build_write
from tests.support import running_server
from tests.support.clients import IngestClient, http_get
from tests.support.stores import SESSION, settled, started

LAYERS = 6
STEPS = 12


def _layers(names: list[str], step: int) -> Histograms:
    bins = [(i + step) % 5 + 1 if i % 2 else 2 for i in range(64)]
    return Histograms(histograms=[Distribution(name=name, min=-1.0, max=1.0 + step, count=sum(bins), bins=bins)
                                  for name in names])


async def _send(url: str) -> None:
    """``STEPS`` events of every layer, then as many holding only ``other``."""
    layers = [f"layer{i}" for i in range(LAYERS)]
    events = [make_event(_layers(layers, step), run_id="wide-hist", seq=step, ts=1.7e9 + step, step=step * 10)
              for step in range(1, STEPS + 1)]
    events += [make_event(_layers(["other"], step), run_id="wide-hist", seq=STEPS + step, ts=1.7e9 + STEPS + step,
                          step=(STEPS + step) * 10) for step in range(1, STEPS + 1)]
    async with IngestClient(url, "wide-hist") as client:
        for event in events:  # a write each: a block holds one event or a few
            await client.send([event])
        await client.wait_ack(len(events))


def test_a_read_decodes_only_the_steps_it_returns_of_the_name_it_asks(tmp_path, monkeypatch):
    decoded: list[bytes] = []
    pick = histograms.pick
    monkeypatch.setattr(histograms, "pick", lambda body, name: decoded.append(body) or pick(body, name))
    with running_server(tmp_path) as url:
        asyncio.run(_send(url))
        base = f"{url}/runs/wide-hist/histograms"
        few = http_get(f"{base}/layer2", params={"max_steps": 3}).json()
        assert [h["step"] for h in few["histograms"]] == [10, 70, 120] and few["taken"] == STEPS
        assert len(decoded) == 3  # not the run's 24 histogram events
        assert few["histograms"][1]["quantiles"] is not None and len(few["histograms"][1]["bins"]) == 64
        decoded.clear()
        other = http_get(f"{base}/other").json()
        assert [h["step"] for h in other["histograms"]] == [(STEPS + s) * 10 for s in range(1, STEPS + 1)]
        assert len(decoded) == STEPS  # only the events holding "other"
        decoded.clear()
        assert http_get(f"{base}/nothing").json() == {"name": "nothing", "quantiles": list(histograms.QUANTILES),
                                                      "histograms": [], "taken": 0}
        assert decoded == []


def test_a_read_that_would_decode_too_much_says_how_to_narrow_it(tmp_path):
    with running_server(tmp_path, max_read_bytes=5_000) as url:  # about four events of six layers
        asyncio.run(_send(url))
        base = f"{url}/runs/wide-hist/histograms/layer0"
        refused = http_get(base)
        assert refused.status_code == 422
        detail = refused.json()["detail"]
        assert "would decode 12 events" in detail and "max_steps=" in detail
        fits = int(detail.rsplit("max_steps=", 1)[1].rstrip(")"))
        assert 1 <= fits < STEPS
        narrowed = http_get(base, params={"max_steps": fits})
        assert narrowed.status_code == 200 and len(narrowed.json()["histograms"]) == fits
        assert http_get(f"{base}", params={"max_steps": fits, "format": "csv"}).status_code == 200
        # The server serves on: another name's read and /healthz are answered.
        assert http_get(f"{url}/runs/wide-hist/histograms/other", params={"max_steps": 2}).status_code == 200
        assert http_get(f"{url}/healthz").status_code == 200


@pytest.mark.single_backend
def test_the_events_stored_before_the_index_are_indexed_at_the_next_start(tmp_path):
    db = tmp_path / "nissa.db"
    with running_server(tmp_path, db_path=db) as url:
        asyncio.run(_send(url))
    with sqlite3.connect(db) as conn:  # as a database of the server before the index was
        conn.execute("DROP TABLE histogram_index")
        conn.execute("DELETE FROM series_progress WHERE id = 3")
    with running_server(tmp_path, db_path=db) as url:
        reply = http_get(f"{url}/runs/wide-hist/histograms/layer5", params={"max_steps": 2}).json()
        assert [h["step"] for h in reply["histograms"]] == [10, 120] and reply["taken"] == STEPS


def test_a_distribution_is_found_however_its_event_is_laid_out():
    """The JSON as the server stores it is searched for the name; any other layout is decoded whole."""
    event = make_event(Histograms(histograms=[Distribution(name="a", min=0.0, max=2.0, count=3, bins=[1, 2]),
                                              Distribution(name="b", min=0.0, max=1.0, count=1, bins=[1])],
                                  labels={"name": "a"}), run_id="r", seq=1, ts=1.7e9, step=7)
    stored = msgspec.json.encode(event)
    spaced = json.dumps(json.loads(stored), indent=1).encode()  # another writer's layout
    for body in (stored, spaced):
        [found] = histograms.pick(body, "a")
        assert (found.step, found.bins, found.count) == (7, [1, 2], 3)
        assert found.quantiles is not None and (found.quantiles[0], found.quantiles[-1]) == (0.0, 2.0)
        assert [h.bins for h in histograms.pick(body, "b")] == [[1]] and histograms.pick(body, "c") == []


def test_an_event_is_read_back_alone_or_out_of_a_block_an_older_server_stored():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE event_blocks (id INTEGER PRIMARY KEY, run_key INT, rank INT, seq INT, n INT, body BLOB)")
    conn.execute("INSERT INTO event_blocks VALUES (1, 1, 0, 1, 3, ?)", (b'{"a":1},{"b":2},{"c":3}',))  # as before
    conn.execute("INSERT INTO event_blocks VALUES (4, 1, 0, 4, 1, ?)", (b'{"d":4}',))  # as blocks.pack stores them
    assert list(histograms._bodies(conn, [2, 4, 3, 9])) == [b'{"b":2}', b'{"d":4}', b'{"c":3}']


def _three_of_one_name(step: int) -> bytes:
    """A ``histogram`` payload holding three distributions called ``w``, as a server took before it refused that."""
    return msgspec.json.encode({"histograms": [{"name": "w", "min": 0.0, "max": 1.0, "count": n, "bins": [n]}
                                               for n in (1, 2, 3)]})


@pytest.mark.single_backend  # no store
def test_a_read_keeps_the_first_distribution_of_the_name_an_event_holds():
    event = make_event(Histograms(histograms=[Distribution(name="w", min=0.0, max=1.0, count=1, bins=[1])]),
                       run_id="r", seq=1, ts=1.7e9, step=7)
    stored = msgspec.json.encode(event).replace(msgspec.json.encode(event.payload), _three_of_one_name(7))
    spaced = json.dumps(json.loads(stored), indent=1).encode()
    for body in (stored, spaced):
        assert [h.bins for h in histograms.pick(body, "w")] == [[1]]


async def test_max_steps_bounds_the_distributions_of_events_stored_with_many_of_one_name(tmp_path):
    store, (run,) = await started(tmp_path, "dups")
    old = [BatchEvent(run_id=run.run_id, rank=0, seq=step, ts=1.7e9, step=step, epoch=0, env=None,
                      kind=EventKind.HISTOGRAM.value, severity=Severity.INFO,
                      payload=msgspec.Raw(_three_of_one_name(step))) for step in range(1, 5)]
    await store.submit_built(lambda: build_write(run, 0, run.stream(0), old, 1 << 20, session=SESSION)[0])
    await settled(store)
    for max_steps, steps in ((1, [4]), (2, [1, 4]), (300, [1, 2, 3, 4])):
        body = await store.read(histograms.read_histograms, run.run_key, "w", None, max_steps, "json", 1 << 30)
        reply = msgspec.json.decode(body, type=HistogramsReply)
        assert [(h.step, h.count) for h in reply.histograms] == [(s, 1) for s in steps], max_steps
    await store.close()
