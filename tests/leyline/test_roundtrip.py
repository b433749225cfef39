import msgspec
import pytest

from leyline import (
    KINDS,
    CommandAction,
    DecodeError,
    EscalateRequest,
    decode_event,
    decode_events,
    decode_frame,
    encode,
    encode_event,
)
from leyline.commands import (
    ESCALATIONS,
    CallRequest,
    CheckpointRequest,
    Command,
    DebugRequest,
    ProfileRequest,
    StacksRequest,
    StopRequest,
    misplaced,
)
from leyline.esper import EsperKind
from leyline.frames import Ack, CommandFrame, EventBatch, Hello, Welcome
from leyline.samples import SAMPLE_PAYLOADS, sample_events


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: e.kind.value)
def test_every_kind_round_trips(event):
    data = encode_event(event)
    back = decode_event(data)
    assert back == event
    assert type(back.payload) is type(event.payload)
    assert encode_event(back) == data


def test_sample_covers_every_kind():
    assert set(SAMPLE_PAYLOADS) == set(KINDS)


def test_none_means_not_measured_and_survives():
    ev = [e for e in sample_events() if e.kind is EsperKind.PPO_UPDATE][0]
    back = decode_event(encode_event(ev))
    assert back.payload.explained_variance is None


def test_batch_round_trip_and_frames():
    events = sample_events()
    assert decode_events(encode(events)) == events
    batch = decode_frame(encode(EventBatch(events=events, cursor=7)))
    assert isinstance(batch, EventBatch) and batch.events == events and batch.cursor == 7
    for frame in (Hello(run_id="r", rank=2, last_seq=9), Welcome(last_seq=3), Ack(seq=4),
                  CommandFrame(command=Command(command_id="c", request=DebugRequest(run_id="r", epochs=2)))):
        assert decode_frame(encode(frame)) == frame


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.replace(b'"seq":1,', b'"seq":0,'), "seq"),
        (lambda d: d.replace(b'"kind":"run_started"', b'"kind":"nope"'), "kind"),
        (lambda d: d.replace(b'"run_id":"sample-run"', b'"run_id":"bad id/.."'), "run_id"),
        (lambda d: d.replace(b'"name":"demo"', b'"name":5'), "payload"),
        (lambda d: d.replace(b'"v":1', b'"v":99'), "schema"),
    ],
)
def test_invalid_events_are_rejected_with_a_reason(mutate, message):
    data = encode_event(sample_events()[0])
    with pytest.raises(DecodeError) as err:
        decode_event(mutate(data))
    assert message in str(err.value)


def test_payload_must_match_kind():
    data = encode_event(sample_events()[0]).replace(b'"kind":"run_started"', b'"kind":"heartbeat"')
    with pytest.raises(DecodeError):
        decode_event(data)


@pytest.mark.parametrize(
    "body",
    [
        {"run_id": "r", "action": "debug"},
        {"run_id": "r", "action": "debug", "epochs": 0},
        {"run_id": "r", "action": "debug", "epochs": 5, "batches": 3},
        {"run_id": "r", "action": "profile"},
        {"run_id": "r", "action": "profile", "batches": 100000},
        {"run_id": "r", "action": "explode", "epochs": 1},
        {"run_id": "r", "action": "debug", "epochs": 1, "extra": True},
        {"run_id": "r", "action": "profile", "target": "update", "batches": 3},
        {"run_id": "r", "action": "profile", "target": "weights"},
        {"run_id": "r", "action": "debug", "through_update": True, "target": "update"},
        {"run_id": "r", "action": "checkpoint", "epochs": 1},
        {"run_id": "r", "action": "stop", "batches": 2},
        {"run_id": "r", "action": "stop", "through_update": True},
        {"run_id": "r", "action": "checkpoint", "target": "update"},
    ],
)
def test_escalate_request_validation(body):
    with pytest.raises((msgspec.ValidationError, ValueError)):
        msgspec.json.decode(msgspec.json.encode(body), type=EscalateRequest)


def test_escalate_request_valid():
    req = msgspec.json.decode(b'{"run_id":"r","action":"profile","batches":5}', type=EscalateRequest)
    assert isinstance(req, ProfileRequest) and req.batches == 5 and req.target is None
    assert req.action is CommandAction.PROFILE
    update = msgspec.json.decode(b'{"run_id":"r","action":"profile","target":"update"}', type=EscalateRequest)
    assert isinstance(update, ProfileRequest) and update.target == "update" and update.batches is None
    for action in ("checkpoint", "stop"):
        req = msgspec.json.decode(b'{"run_id":"r","action":"%s","reason":"why"}' % action.encode(),
                                  type=EscalateRequest)
        assert req.action is CommandAction(action) and req.reason == "why" and not hasattr(req, "epochs")


@pytest.mark.parametrize("request_", [
    DebugRequest(run_id="r", epochs=3), DebugRequest(run_id="r", through_update=True, reason="why"),
    ProfileRequest(run_id="r", batches=5, with_stack=True), ProfileRequest(run_id="r", target="update", phase="eval"),
    CheckpointRequest(run_id="r"), StopRequest(run_id="r"), StacksRequest(run_id="r"),
    CallRequest(run_id="r", name="set_lr", args={"lr": 0.1}),
])
def test_each_command_travels_as_its_own_struct_tagged_by_action(request_):
    """What a client encodes is what the server decodes: the ``action`` tag chooses the struct, and a field
    left at its default is not sent."""
    wire = msgspec.json.decode(msgspec.json.encode(request_))
    assert wire["action"] == request_.action.value and ("reason" in wire) == (request_.reason is not None)
    assert msgspec.json.decode(msgspec.json.encode(request_), type=EscalateRequest) == request_
    assert {tp.__struct_config__.tag for tp in ESCALATIONS} == {a.value for a in CommandAction}


@pytest.mark.parametrize(("body", "hint"), [
    ({"action": "debug", "epochs": 1, "target": "update"}, "'target' belongs to action 'profile', not 'debug'"),
    ({"action": "stop", "through_update": True}, "'through_update' belongs to action 'debug', not 'stop'"),
    ({"action": "stacks", "name": "x"}, "'name' belongs to action 'call', not 'stacks'"),
    ({"action": "debug", "colour": "red"}, None),  # nobody's field: msgspec's own message says it
    ({"action": "explode", "target": "update"}, None),
    (["debug"], None),
])
def test_a_field_of_another_action_is_named_with_its_action(body, hint):
    assert misplaced(body) == hint


def test_a_non_finite_validation_loss_still_travels():
    # JSON has no NaN: the encoder writes null, which the contract reads back as "not finite".
    from leyline import make_event
    from leyline.esper import EpochCompleted

    event = make_event(EpochCompleted(accuracy=0.1, val_loss=float("nan"), train_loss=float("inf")), run_id="r", seq=1,
                       ts=0.0)
    back = decode_event(encode_event(event))
    assert back.payload.val_loss is None and back.payload.train_loss is None and back.payload.accuracy == 0.1
