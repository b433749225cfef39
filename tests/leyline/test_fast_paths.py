"""The cheaper-than-round-trip paths must be exactly as strict as the round trip they replace."""

import msgspec
import pytest

from leyline import DecodeError, Severity, decode_event, encode, encode_event, make_event
from leyline.codec import check_rank, check_run_id, decode_frame, decode_frame_wire, encode_checked
from leyline.esper import EpochCompleted
from leyline.frames import EventBatch
from leyline.samples import sample_events


def _checked(event, **override):
    fields = dict(run_id=event.run_id, rank=event.rank, seq=event.seq, ts=event.ts, step=event.step,
                  epoch=event.epoch, env=event.env, severity=event.severity)
    fields.update(override)
    return encode_checked(event.payload, **fields)


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: e.kind.value)
def test_encode_checked_gives_the_bytes_of_encode_event(event):
    assert _checked(event) == encode_event(event)
    assert decode_event(_checked(event, env=3)).env == 3


@pytest.mark.parametrize(
    "override, where",
    [
        ({"step": -1}, "$.step"),
        ({"step": 1.0}, "$.step"),
        ({"epoch": True}, "$.epoch"),
        ({"env": -2}, "$.env"),
        ({"seq": 0}, "$.seq"),
        ({"ts": float("nan")}, "$.ts"),
        ({"ts": float("inf")}, "$.ts"),
        ({"ts": "now"}, "$.ts"),
        ({"ts": 10**400}, "$.ts"),
        ({"step": 2**63}, "$.step"),
        ({"step": 2**53 + 1}, "$.step"),
    ],
)
def test_encode_checked_refuses_a_bad_envelope(override, where):
    event = sample_events()[0]
    with pytest.raises(msgspec.ValidationError, match=rf"at `\{where}`"):
        _checked(event, **override)


def test_encode_checked_refuses_what_decoding_refuses_and_says_where():
    bad = EpochCompleted(accuracy="high", val_loss=1.0)  # type: ignore[arg-type]
    envelope = dict(run_id="r", rank=0, seq=1, ts=1.0, step=0, epoch=0, env=None)
    with pytest.raises(msgspec.ValidationError, match=r"epoch_completed: .* at `\$\.payload\.accuracy`"):
        encode_checked(bad, severity=Severity.INFO, **envelope)
    with pytest.raises(DecodeError):  # the round trip it replaces refuses the same event
        decode_event(encode_event(make_event(bad, **envelope)))
    with pytest.raises(ValueError):
        _checked(sample_events()[0], severity="loud")


def test_check_run_id_and_rank():
    check_run_id("run-1.a_b:c")
    check_run_id("a..b")
    check_run_id("a-")
    for bad in ("", "has space", "a/b", "x" * 129, "trailing\n", 5, ".", "..", "...", "..\n", "-", "-x", "--help",
                "=1+2", "+1", "@SUM(A1)"):
        with pytest.raises(msgspec.ValidationError):
            check_run_id(bad)  # type: ignore[arg-type]
    with pytest.raises(msgspec.ValidationError, match="not starting with '-' \\(a spreadsheet reads it as a formula"):
        check_run_id("-2+3")
    check_rank(0)
    check_rank(65535)
    for bad in (-1, 65536, True, 1.0, "1"):
        with pytest.raises(msgspec.ValidationError):
            check_rank(bad)  # type: ignore[arg-type]


def test_counters_beyond_what_sqlite_stores_are_refused_on_decode():
    data = encode_event(sample_events()[0])
    with pytest.raises(DecodeError, match="step"):
        decode_event(data.replace(b'"step":0', b'"step":%d' % 2**63))


def test_a_batch_frame_checks_every_distinct_run_id_and_names_the_event():
    events = sample_events(run_id="good")
    data = encode(EventBatch(events=events))
    decoded = decode_frame_wire(data).events
    assert [encode(e) for e in decoded] == [encode_event(e) for e in events]  # what the server stores
    third = encode_event(events[2])
    broken = data.replace(third, third.replace(b'"run_id":"good"', b'"run_id":"bad id"'))
    with pytest.raises(DecodeError, match=r"at `\$\.events\[2\]\.run_id`"):
        decode_frame_wire(broken)


def test_encode_checked_accepts_what_decoding_accepts():
    import enum

    class Epoch(enum.IntEnum):
        FIRST = 1

    event = sample_events()[0]
    for override in ({"ts": 5}, {"epoch": Epoch.FIRST}, {"step": 2**53}):
        line = _checked(event, **override)
        assert line == encode_event(msgspec.structs.replace(event, **override))
        decode_event(line)


def test_a_command_step_reads_up_to_what_sqlite_stores_one_stored_before_the_2_53_rule_included():
    from leyline.payloads_ops import CommandStatusChanged

    body = b'{"command_id":"c","action":"debug","status":"applied","applied_step":%d}'
    assert msgspec.json.decode(body % (2**63 - 1), type=CommandStatusChanged).applied_step == 2**63 - 1
    with pytest.raises(msgspec.ValidationError, match="applied_step"):
        msgspec.json.decode(body % 2**63, type=CommandStatusChanged)


def test_a_bad_run_id_is_refused_in_words_not_as_a_regular_expression():
    from leyline.events import RUN_ID_RULE

    hello = b'{"type":"hello","run_id":"-2+3","rank":0}'
    for decode in (decode_frame, decode_frame_wire):
        with pytest.raises(DecodeError) as refused:
            decode(hello)
        assert RUN_ID_RULE in str(refused.value) and "regex" not in str(refused.value), refused.value
        assert "at `$.run_id`" in str(refused.value)
