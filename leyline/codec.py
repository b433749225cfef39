"""Encode and decode events with validation: one definition for trainer, server and TUI."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

import msgspec

from leyline.enums import Kind, Severity
from leyline.events import (
    MAX_INT,
    PAYLOAD_TYPES,
    RUN_ID_PATTERN,
    RUN_ID_RULE,
    SCHEMA_VERSION,
    Event,
    Rank,
    RunId,
    _WireEvent,
)
from leyline.kinds import KIND_NAMES, AnyPayload
from leyline.payloads import STEP_RULE, is_step
from leyline.payloads_histogram import second_name
from leyline.text import NO_CONTROL_PATTERN, NO_CONTROL_RULE

_encoder = msgspec.json.Encoder()
_wire_decoder = msgspec.json.Decoder(_WireEvent)
_wire_list_decoder = msgspec.json.Decoder(list[_WireEvent])
_payload_decoders = {kind.value: msgspec.json.Decoder(cls) for kind, cls in PAYLOAD_TYPES.items()}
_run_id_decoder = msgspec.json.Decoder(RunId)
_rank_decoder = msgspec.json.Decoder(Rank)

DecodeError = msgspec.DecodeError  # ValidationError is a subclass


class Unsupported(msgspec.ValidationError):
    """A frame this side cannot read though a newer side may: an event of a newer schema version, or of a
    kind this side does not know. Raised instead of the plain ``ValidationError`` it would be."""


class _KindOnly(msgspec.Struct):
    kind: str
    v: int = SCHEMA_VERSION


class _KindsOnly(msgspec.Struct, tag="events", tag_field="type"):
    events: list[_KindOnly]


_kinds_only = msgspec.json.Decoder(_KindsOnly)


def _newer(data: bytes | str) -> bool:
    """Whether an events frame holds an event of a kind or schema version this side does not know (only
    asked once the frame failed to decode: it costs a second pass)."""
    try:
        frame = _kinds_only.decode(data)
    except msgspec.DecodeError:
        return False
    return any(e.v > SCHEMA_VERSION or e.kind not in KIND_NAMES for e in frame.events)


def encode_event(event: Event) -> bytes:
    """One event as compact JSON bytes (one line of the run log)."""
    return _encoder.encode(event)


def encode(obj: object) -> bytes:
    """Any leyline struct (frames, commands) as JSON bytes."""
    return _encoder.encode(obj)


def payload_of(wire: _WireEvent | _BatchEvent) -> AnyPayload:
    """Validate and decode the raw payload of a ``WireEvent`` (and its schema version)."""
    if wire.v > SCHEMA_VERSION:
        raise Unsupported(f"schema v{wire.v} is newer than this side's v{SCHEMA_VERSION}")
    try:
        payload: AnyPayload = _payload_decoders[wire.kind].decode(wire.payload)
    except msgspec.ValidationError as err:
        # Point at the field as it sits in the envelope, not in the detached payload.
        where = str(err).replace("at `$", "at `$.payload")
        if "at `$" not in where:
            where = f"{where} - at `$.payload`"
        raise msgspec.ValidationError(f"{wire.kind}: {where}") from None
    return payload


def _finish(wire: _WireEvent | _BatchEvent) -> Event:
    payload = payload_of(wire)
    return Event(
        run_id=wire.run_id, rank=wire.rank, seq=wire.seq, ts=wire.ts, step=wire.step,
        epoch=wire.epoch, env=wire.env, kind=KIND_NAMES[wire.kind], severity=wire.severity,
        payload=payload, v=wire.v,
    )


def decode_event(data: bytes | str) -> Event:
    """Validate and decode one event; raises ``DecodeError`` with a readable reason."""
    return _finish(_wire_decoder.decode(data))


def decode_events(data: bytes | str) -> list[Event]:
    """Validate and decode a JSON array of events."""
    return [_finish(w) for w in _wire_list_decoder.decode(data)]


class _LineEvent(msgspec.Struct, kw_only=True, gc=False):
    # Event's fields in Event's order, with the payload already encoded: the same bytes.
    run_id: str
    rank: int
    seq: int
    ts: float
    step: int
    epoch: int
    env: int | None
    kind: Kind
    severity: Severity
    payload: msgspec.Raw
    v: int = SCHEMA_VERSION


def _int_at_least(name: str, value: object, low: int) -> None:
    # As decoding would judge the encoded value: bool encodes as true/false, not as a number.
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= MAX_INT:
        raise msgspec.ValidationError(f"Expected `int` in {low}..{MAX_INT}, got {value!r} - at `$.{name}`")


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def encode_checked(payload: AnyPayload, *, run_id: str, rank: int, seq: int, ts: float, step: int, epoch: int,
                   env: int | None, severity: Severity) -> bytes:
    """``encode_event(make_event(...))``'s bytes, refusing what ``decode_event`` would refuse.

    Cheaper than encoding and decoding the whole event back: only the payload makes the round
    trip; the envelope's fields are checked directly. ``run_id`` and ``rank`` are the caller's to
    check once (``check_run_id``, ``check_rank``); they are the same for every event of a hub.
    """
    kind = payload.KIND
    _int_at_least("seq", seq, 1)
    if not is_step(step):
        raise msgspec.ValidationError(f"Expected a step, {STEP_RULE}, got {step!r} - at `$.step`")
    _int_at_least("epoch", epoch, 0)
    if env is not None:
        _int_at_least("env", env, 0)
    # An int is a valid float; NaN and infinity would encode as null.
    if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not _finite(ts):
        raise msgspec.ValidationError(f"Expected a finite `float`, got {ts!r} - at `$.ts`")
    body = _encoder.encode(payload)
    try:
        _payload_decoders[kind].decode(body)
    except msgspec.ValidationError as err:
        raise msgspec.ValidationError(f"{kind.value}: {err}".replace("at `$", "at `$.payload")) from None
    if (why := second_name(payload)) is not None:
        raise msgspec.ValidationError(f"{kind.value}: {why} - at `$.payload`")
    if type(severity) is not Severity:
        severity = Severity(severity)
    return _encoder.encode(_LineEvent(run_id=run_id, rank=rank, seq=seq, ts=ts, step=step, epoch=epoch, env=env,
                                      kind=kind, severity=severity, payload=msgspec.Raw(body)))


def to_builtins(obj: object) -> Any:
    """A struct as plain JSON-ready Python values (for REST responses)."""
    return msgspec.to_builtins(obj)


class _BatchEvent(_WireEvent, kw_only=True, gc=False):
    """``_WireEvent`` inside a batch frame: ``run_id`` is checked once per distinct value
    (``_check_run_ids``) instead of by a regex per event; batches carry one run."""

    run_id: str


class _WireBatch(msgspec.Struct, tag="events", tag_field="type", kw_only=True):
    events: list[_BatchEvent]
    cursor: int = 0


def check_run_id(run_id: str) -> None:
    """Raise ``ValidationError`` unless ``run_id`` is a str that follows the ``RunId`` rule."""
    if type(run_id) is not str:
        raise msgspec.ValidationError(f"Expected `str`, got `{type(run_id).__name__}` - at `$.run_id`")
    try:
        _run_id_decoder.decode(_encoder.encode(run_id))
    except msgspec.ValidationError:
        raise msgspec.ValidationError(f"run id {run_id[:40]!r} is not valid: {RUN_ID_RULE}") from None


def check_rank(rank: int) -> None:
    """Raise ``ValidationError`` unless ``rank`` is a trainer's rank (the server's is reserved)."""
    _int_at_least("rank", rank, 0)
    _rank_decoder.decode(_encoder.encode(rank))


def _check_run_ids(events: list[_BatchEvent]) -> None:
    """The ``RunId`` rule, as strict as decoding each envelope with it, once per distinct value."""
    for run_id in {e.run_id for e in events}:
        try:
            check_run_id(run_id)
        except msgspec.ValidationError as err:
            at = next(i for i, e in enumerate(events) if e.run_id == run_id)
            raise msgspec.ValidationError(f"{err} - at `$.events[{at}].run_id`") from None


def _frame_decoder() -> msgspec.json.Decoder:
    from leyline.frames import Ack, CommandFrame, Hello, Welcome

    return msgspec.json.Decoder(Hello | _WireBatch | Welcome | Ack | CommandFrame)


_frame_dec: msgspec.json.Decoder | None = None


def _decode_any_frame(data: bytes | str) -> object:
    global _frame_dec
    if _frame_dec is None:
        _frame_dec = _frame_decoder()
    return _frame_dec.decode(data)


def _not_too_deep(decode: Callable[..., object]) -> Callable[..., object]:
    """``decode``, with JSON nested deeper than the interpreter's stack allows refused like any
    other bad input (a ``DecodeError``), instead of escaping as a ``RecursionError``; and an event this
    side cannot read (a newer kind or schema) raised as ``Unsupported``, a ``ValidationError``."""

    @functools.wraps(decode)
    def checked(data: bytes | str, *more: Any) -> object:
        try:
            return decode(data, *more)
        except RecursionError:
            raise msgspec.DecodeError("JSON nested too deeply") from None
        except Unsupported:
            raise
        except msgspec.ValidationError as err:
            if _newer(data):
                raise Unsupported(str(err)) from None
            raise msgspec.ValidationError(in_words(err)) from None
        except msgspec.DecodeError as err:
            raise msgspec.DecodeError(in_words(err, data)) from None

    return checked


_STEP_BOUND = re.compile(rf"Expected `int` (?:>= 0|<= {MAX_INT})( - at `[^`]*\.step`)")
"""msgspec's words for an event's step below 0 or past what SQLite stores, where it is: said as a new step's rule."""
_IN_WORDS = {f"Expected `str` matching regex {RUN_ID_PATTERN!r}": f"Expected a run id: {RUN_ID_RULE}",
             f"Expected `str` matching regex {NO_CONTROL_PATTERN!r}": f"Expected `str` with {NO_CONTROL_RULE}"}


_LONE_SURROGATE = re.compile(rb"(?<!\\)(?:\\\\)*(\\u[dD][89abAB][0-9a-fA-F]{2})(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})")
"""A high surrogate's escape (its backslash not itself escaped) without a low one after it: no character."""


def in_words(err: msgspec.ValidationError | msgspec.DecodeError, data: bytes | str | None = None) -> str:
    """``err``'s message, with a rule msgspec states as a regular expression or a bound said in words (the run id's,
    a text's without control characters, an event's step); where ``data``, the JSON that failed, holds a lone surrogate
    (msgspec says it was truncated), that said with where it is."""
    message = str(err)
    if data is not None and message == "Input data was truncated":
        return _lone_surrogate(data) or message
    for regex, words in _IN_WORDS.items():
        message = message.replace(regex, words)
    return _STEP_BOUND.sub(rf"Expected a step, {STEP_RULE}\1", message)


def _lone_surrogate(data: bytes | str) -> str | None:
    raw = data.encode(errors="surrogatepass") if isinstance(data, str) else data
    found = _LONE_SURROGATE.search(raw)
    if found is None:
        return None
    return (f"JSON is malformed: `{found.group(1).decode()}` (byte {found.start(1)}) is a lone UTF-16 surrogate, "
            "half of a pair: no character, so no valid text")


@_not_too_deep
def decode_frame(data: bytes | str) -> object:
    """Decode and validate any websocket frame; an ``events`` frame yields an ``EventBatch``."""
    frame = _decode_any_frame(data)
    if isinstance(frame, _WireBatch):
        from leyline.frames import EventBatch

        _check_run_ids(frame.events)

        return EventBatch(events=[_finish(w) for w in frame.events], cursor=frame.cursor)
    return frame


# Public names for relays that store or forward events without rebuilding them (the server).
WireEvent = _WireEvent
BatchEvent = _BatchEvent
WireBatch = _WireBatch


@_not_too_deep
def decode_frame_wire(data: bytes | str, payloads: list[AnyPayload] | None = None) -> object:
    """Like ``decode_frame`` and exactly as strict, but an ``events`` frame stays a ``WireBatch``:
    every envelope and payload is validated, and each payload is kept as its raw JSON (and, decoded, appended
    to ``payloads`` where one is given: what a relay reads of them, without decoding them again)."""
    frame = _decode_any_frame(data)
    if isinstance(frame, _WireBatch):
        _check_run_ids(frame.events)
        decoded = [payload_of(wire) for wire in frame.events]
        _check_new(frame.events, decoded)
        if payloads is not None:
            payloads.extend(decoded)
    return frame


def _check_new(events: list[_BatchEvent], payloads: list[AnyPayload]) -> None:
    """The rules of a new event that an older one, stored before them, need not hold (it still reads): its step
    (``is_step``), a distribution of each name at most (``second_name``)."""
    for i, (wire, payload) in enumerate(zip(events, payloads, strict=True)):
        if not is_step(wire.step):
            raise msgspec.ValidationError(f"Expected a step, {STEP_RULE} - at `$.events[{i}].step`")
        why = second_name(payload)
        if why is not None:
            raise msgspec.ValidationError(f"{why} - at `$.events[{i}].payload`")
