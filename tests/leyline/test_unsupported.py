"""A frame a newer side may send (an unknown kind, a newer schema) is told apart from a broken one by its
type, ``Unsupported``, never by the wording of the decoder's message."""

import json

import msgspec
import pytest

from leyline import Heartbeat, encode, make_event
from leyline.codec import Unsupported, decode_frame, decode_frame_wire
from leyline.frames import EventBatch


def _frame(**change) -> bytes:
    frame = json.loads(encode(EventBatch(events=[make_event(Heartbeat(uptime_s=1.0), run_id="r", seq=1, ts=1.0)])))
    frame["events"][0].update(change)
    return json.dumps(frame).encode()


@pytest.mark.parametrize("decode", [decode_frame, decode_frame_wire])
def test_unknown_kinds_and_newer_schemas_are_unsupported_and_broken_frames_are_not(decode):
    for change in ({"kind": "weather_report"}, {"v": 99}):
        with pytest.raises(Unsupported):
            decode(_frame(**change))
    for change in ({"severity": "loud"}, {"seq": 0}, {"kind": 7}, {"payload": {"uptime_s": "soon"}}):
        with pytest.raises(msgspec.ValidationError) as info:
            decode(_frame(**change))
        assert not isinstance(info.value, Unsupported), change
    with pytest.raises(msgspec.DecodeError) as info:
        decode(b'{"type": "events", "events": [')
    assert not isinstance(info.value, Unsupported)
