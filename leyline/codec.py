"""Encode and decode events with validation: one definition for trainer, server and TUI."""

from __future__ import annotations

import msgspec

from leyline.events import PAYLOAD_TYPES, SCHEMA_VERSION, Event, _WireEvent
from leyline.payloads import Payload

_encoder = msgspec.json.Encoder()
_wire_decoder = msgspec.json.Decoder(_WireEvent)
_wire_list_decoder = msgspec.json.Decoder(list[_WireEvent])
_payload_decoders = {kind: msgspec.json.Decoder(cls) for kind, cls in PAYLOAD_TYPES.items()}

DecodeError = msgspec.DecodeError  # ValidationError is a subclass


def encode_event(event: Event) -> bytes:
    """One event as compact JSON bytes (one line of the run log)."""
    return _encoder.encode(event)


def encode(obj: object) -> bytes:
    """Any leyline struct (frames, commands) as JSON bytes."""
    return _encoder.encode(obj)


def payload_of(wire: _WireEvent) -> Payload:
    """Validate and decode the raw payload of a ``WireEvent`` (and its schema version)."""
    if wire.v > SCHEMA_VERSION:
        raise msgspec.ValidationError(f"schema v{wire.v} is newer than this side's v{SCHEMA_VERSION}")
    try:
        payload: Payload = _payload_decoders[wire.kind].decode(wire.payload)
    except msgspec.ValidationError as err:
        # Point at the field as it sits in the envelope, not in the detached payload.
        where = str(err).replace("at `$", "at `$.payload")
        if "at `$" not in where:
            where = f"{where} - at `$.payload`"
        raise msgspec.ValidationError(f"{wire.kind.value}: {where}") from None
    return payload


def _finish(wire: _WireEvent) -> Event:
    payload = payload_of(wire)
    return Event(
        run_id=wire.run_id, rank=wire.rank, seq=wire.seq, ts=wire.ts, step=wire.step,
        epoch=wire.epoch, env=wire.env, kind=wire.kind, severity=wire.severity,
        payload=payload, v=wire.v,
    )


def decode_event(data: bytes | str) -> Event:
    """Validate and decode one event; raises ``DecodeError`` with a readable reason."""
    return _finish(_wire_decoder.decode(data))


def decode_events(data: bytes | str) -> list[Event]:
    """Validate and decode a JSON array of events."""
    return [_finish(w) for w in _wire_list_decoder.decode(data)]


def to_builtins(obj: object) -> object:
    """A struct as plain JSON-ready Python values (for REST responses)."""
    return msgspec.to_builtins(obj)


class _WireBatch(msgspec.Struct, tag="events", tag_field="type", kw_only=True):
    events: list[_WireEvent]
    cursor: int = 0


def _frame_decoder() -> msgspec.json.Decoder:
    from leyline.frames import Ack, CommandFrame, Hello, Welcome

    return msgspec.json.Decoder(Hello | _WireBatch | Welcome | Ack | CommandFrame)


_frame_dec: msgspec.json.Decoder | None = None


def _decode_any_frame(data: bytes | str) -> object:
    global _frame_dec
    if _frame_dec is None:
        _frame_dec = _frame_decoder()
    return _frame_dec.decode(data)


def decode_frame(data: bytes | str) -> object:
    """Decode and validate any websocket frame; an ``events`` frame yields an ``EventBatch``."""
    frame = _decode_any_frame(data)
    if isinstance(frame, _WireBatch):
        from leyline.frames import EventBatch

        return EventBatch(events=[_finish(w) for w in frame.events], cursor=frame.cursor)
    return frame


# Public names for relays that store or forward events without rebuilding them (the server).
WireEvent = _WireEvent
WireBatch = _WireBatch


def decode_frame_wire(data: bytes | str) -> object:
    """Like ``decode_frame`` and exactly as strict, but an ``events`` frame stays a ``WireBatch``:
    every envelope and payload is validated, and each payload is kept as its raw JSON."""
    frame = _decode_any_frame(data)
    if isinstance(frame, _WireBatch):
        for wire in frame.events:
            payload_of(wire)
    return frame
