"""Histograms are checked at ingest (``leyline.payloads_histogram.distribution_problem``): a trainer that sends
bins that do not add up, a negative bin, counts past int64 or ``min`` above ``max`` has its connection closed
with the rule in words, and nothing of the batch is stored."""

from __future__ import annotations

import httpx
import msgspec
import pytest

from leyline import Histograms, make_event
from leyline.frames import CLOSE_BAD_FRAME, EventBatch
from leyline.payloads_histogram import Distribution
from tests.support import IngestClient
from tests.support.clients import close_of

GOOD = Distribution(name="w", min=-1.0, max=1.0, count=6, bins=[1, 2, 3])


@pytest.mark.single_backend  # checked before any store
@pytest.mark.parametrize(("change", "words"), [
    ({"count": 7}, "count 7 is not the sum of its bins (6)"),
    ({"bins": [4, -1, 3]}, "bin 1 counts -1"),
    ({"min": 2.0}, "min 2.0 is above max 1.0"),
    ({"bins": [2**64 - 1, 0, 0], "count": 2**64 - 1}, "bin 0 counts 18446744073709551615"),
    ({"nonfinite": -3}, "nonfinite -3"),
    ({"min": -1.7e308, "max": 1.7e308}, "max - min must be finite"),
])
async def test_a_histogram_that_is_no_distribution_is_refused_with_the_rule(server_url, change, words):
    event = msgspec.to_builtins(make_event(Histograms(histograms=[GOOD]), run_id="hist", seq=2, ts=1.7e9))
    event["payload"]["histograms"][0].update(change)
    first = msgspec.to_builtins(make_event(Histograms(histograms=[GOOD]), run_id="hist", seq=1, ts=1.7e9))
    frame = msgspec.to_builtins(EventBatch(events=[]))
    frame["events"] = [first, event]
    async with IngestClient(server_url, "hist") as client:
        assert client.ws is not None
        await client.ws.send(msgspec.json.encode(frame).decode())
        code, reason = await close_of(client.ws)
    assert code == CLOSE_BAD_FRAME and words in reason and "histograms[0] ('w')" in reason, (code, reason)
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        assert (await http.get("/runs/hist/events")).json() == [], "the whole batch is refused"


@pytest.mark.single_backend  # checked before any store
async def test_an_event_of_two_distributions_of_one_name_is_refused_with_the_rule(server_url):
    event = msgspec.to_builtins(make_event(Histograms(histograms=[GOOD]), run_id="twice", seq=1, ts=1.7e9))
    event["payload"]["histograms"] *= 2
    frame = msgspec.to_builtins(EventBatch(events=[]))
    frame["events"] = [event]
    async with IngestClient(server_url, "twice") as client:
        assert client.ws is not None
        await client.ws.send(msgspec.json.encode(frame).decode())
        code, reason = await close_of(client.ws)
    assert code == CLOSE_BAD_FRAME and "histograms[1] ('w'): a second distribution of that name" in reason, reason
