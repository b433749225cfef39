"""Steps past what a chart holds exactly (2^53): ingest refuses one in words at either door (a live trainer, an
upload), and one an older server already stored (2^63-1 is 2^63 as a float) does not stop the series pass (both
stores)."""

from __future__ import annotations

import httpx
import msgspec
import pytest

from leyline import CommandRecord, EventKind, Metrics, Severity, decode_events, encode, encode_event, make_event
from leyline.codec import BatchEvent, WireEvent
from leyline.commands import StatusChange
from leyline.frames import CLOSE_BAD_FRAME
from leyline.payloads import MAX_INT, MAX_STEP
from nissa_server.batches import build_write
from nissa_server.store import summaries_sql
from tests.nissa_server.test_series_pass import NEVER, _charts, _submit
from tests.support import IngestClient
from tests.support.clients import close_of
from tests.support.stores import SESSION, started


def _stored_as_an_older_server_took_it(run_id: str, seq: int, step: int) -> BatchEvent:
    """A ``metrics`` event at ``step`` as ingest's check before the 2^53 bound let it through."""
    return BatchEvent(run_id=run_id, rank=0, seq=seq, ts=1.7e9, step=step, epoch=0, env=None,
                      kind=EventKind.METRICS.value, severity=Severity.INFO,
                      payload=msgspec.Raw(encode(Metrics(values={"loss": float(seq)}))))


async def test_a_stored_step_past_what_sqlite_keeps_as_a_float_does_not_stop_the_series_pass(tmp_path):
    store, (huge, other) = await started(tmp_path, "huge", "other", series_interval_s=NEVER)
    old = [_stored_as_an_older_server_took_it(huge.run_id, 1, MAX_INT)]
    await store.submit_built(lambda: build_write(huge, 0, huge.stream(0), old, 1 << 20, session=SESSION)[0])
    await _submit(store, other, [make_event(Metrics(values={"loss": 2.0}), run_id=other.run_id, seq=1, ts=1.7e9,
                                            step=3)])
    assert await store.series_pass.once() is False
    summaries = await store.read(summaries_sql.read, [huge.run_key, other.run_key])
    assert summaries[huge.run_key]["loss{rank=0}"].step == MAX_INT, "clamped into the column"
    assert (await _charts(store, huge))[0] == {"loss{rank=0}": ([2.0**63], [1.0])}
    assert (await _charts(store, other))[0] == {"loss{rank=0}": ([3.0], [2.0])}, "the pass went on"
    await store.close()


async def _refused(server_url: str, run_id: str, step: int, upload: bool) -> tuple[int, str]:
    async with IngestClient(server_url, run_id, upload=upload) as client:
        await client.send([make_event(Metrics(values={"loss": 1.0}), run_id=run_id, seq=1, ts=1.7e9, step=0),
                           make_event(Metrics(values={"loss": 1.0}), run_id=run_id, seq=2, ts=1.7e9, step=step)])
        assert client.ws is not None
        return await close_of(client.ws)


@pytest.mark.single_backend  # checked before any store
@pytest.mark.parametrize("upload", [False, True], ids=["live", "upload"])
@pytest.mark.parametrize("step", [MAX_STEP + 1, MAX_INT, -1])
async def test_a_step_a_chart_cannot_hold_exactly_is_refused_in_words_at_every_door(server_url, upload, step):
    code, reason = await _refused(server_url, "far", step, upload)
    assert code == CLOSE_BAD_FRAME, (code, reason)
    assert "Expected a step, a whole number from 0 to 2^53 (9,007,199,254,740,992)" in reason, reason
    assert "at `$.events[1].step`" in reason, reason
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        assert (await http.get("/runs/far/events")).json() == [], "the whole batch is refused"


@pytest.mark.single_backend  # checked before any store
async def test_the_largest_step_is_taken(server_url):
    async with IngestClient(server_url, "edge") as client:
        await client.send([make_event(Metrics(values={"loss": 1.0}), run_id="edge", seq=1, ts=1.7e9, step=MAX_STEP)])
        assert await client.wait_ack(1) == 1


_wire = msgspec.json.Decoder(WireEvent)


@pytest.mark.single_backend  # no store
def test_an_event_or_command_stored_past_the_2_53_rule_still_reads():
    """What an older server stored reads on: the rule is checked where a step comes in, not where one is read."""
    old = make_event(Metrics(values={"loss": 1.0}), run_id="old", seq=1, ts=1.7e9, step=2**60)
    assert decode_events(b"[" + encode_event(old) + b"]")[0].step == 2**60
    assert _wire.decode(encode_event(old)).step == 2**60  # as the server re-reads it for its own events
    history = [{"status": "applied", "ts": 1.0, "step": 1_700_000_000_000_000_000}]
    assert msgspec.json.decode(msgspec.json.encode(history), type=list[StatusChange])[0].step == 1.7e18
    record = {"command_id": "c", "run_id": "old", "action": "debug", "status": "applied", "created_at": 1.0,
              "updated_at": 1.0, "applied_step": MAX_INT}
    assert msgspec.json.decode(msgspec.json.encode(record), type=CommandRecord).applied_step == MAX_INT
