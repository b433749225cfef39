"""A frame's events as a store write: the usual frame (every event the next of its stream) and the rest
give the same rows, counts and stream, and a NUL is found however a frame escapes its strings."""

import json

import pytest

from leyline import Heartbeat, Metrics, encode, make_event
from leyline.codec import decode_frame_wire
from leyline.frames import EventBatch
from nissa_server.batches import body_of, build_write
from nissa_server.runs import RunState, Stream

pytestmark = pytest.mark.single_backend


def _run() -> RunState:
    return RunState(run_key=1, run_id="b", name="", secret_hash=b"x" * 32)


def _frame(events: list) -> tuple[list, list]:
    payloads: list = []
    return decode_frame_wire(encode(EventBatch(events=events)), payloads).events, payloads


def _metrics(seq: int, label: str = "a") -> object:
    return make_event(Metrics(values={"loss": 1.0 / seq}, labels={"split": label}), run_id="b", seq=seq, ts=1.0)


def _one_by_one(stream: Stream, events: list) -> list[tuple]:
    """What each event alone would give: the rows of those the stream accepts."""
    return [(e.seq, e.kind, e.severity.rank, body_of(e)) for e in events if stream.accept(e.seq)]


@pytest.mark.parametrize("stored, seqs", [
    ([], [1, 2, 3, 4]),  # the usual frame
    ([1, 2], [3, 4, 5]),  # the usual frame, after others
    ([], [2, 3]),  # a gap before it
    ([1, 2], [2, 3, 4]),  # a repeat at its start
    ([1, 3], [2, 4, 5]),  # filling a gap, with one ahead already
    ([1], [2, 3, 5]),  # a gap inside it
])
def test_a_write_has_the_rows_and_stream_of_its_events_taken_one_by_one(stored, seqs):
    events = [_metrics(s) if s != 4 else make_event(Heartbeat(uptime_s=1.0), run_id="b", seq=s, ts=1.0) for s in seqs]
    wire, payloads = _frame(events)
    stream, expected = Stream(), Stream()
    for s in stored:
        stream.accept(s)
        expected.accept(s)
    rows = _one_by_one(expected, wire)
    write, duplicates = build_write(_run(), 0, stream, wire, 1 << 20, session=None, payloads=payloads)
    assert write.rows == rows and duplicates == len(events) - len(rows)
    assert (stream.contiguous, stream.last_seq, stream.ahead) == (expected.contiguous, expected.last_seq,
                                                                  expected.ahead)
    assert (write.contiguous, write.last_seq) == (expected.contiguous, expected.last_seq)
    kinds: dict[str, int] = {}
    for row in rows:
        kinds[row[1]] = kinds.get(row[1], 0) + 1
    assert write.kinds == kinds
    assert [e.seq for e in write.effects] == [row[0] for row in rows if row[1] == "heartbeat"]
    assert (write.decoded is not None) == (len(rows) == len(events))


@pytest.mark.parametrize("label, nul", [
    ("plain", False),
    ('a "quoted" \\ back\\slash', False),  # escapes, none of them a NUL
    ("\\u0000 as text", False),  # a backslash, then the characters u0000: no NUL
    ("a\x00b", True),
    ('"\\\x00"', True),  # a NUL beside other escapes
])
def test_a_nul_is_replaced_wherever_it_is_and_nothing_else(label, nul):
    wire, payloads = _frame([_metrics(1, label)])
    write, _ = build_write(_run(), 0, Stream(), wire, 1 << 20, session=None, payloads=payloads)
    stored = json.loads(write.rows[0][3])["payload"]["labels"]["split"]
    assert stored == label.replace("\x00", "\ufffd")
    assert (write.decoded is None) == nul, "payloads as decoded go with a write only where they are what is stored"
