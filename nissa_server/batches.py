"""Turn validated events into a store write: de-duplicate, encode once, note side effects."""

from __future__ import annotations

import time
from collections import Counter
from operator import itemgetter

import msgspec

from leyline import SERVER_RANK, AnyPayload, CommandStatusChanged, Event, EventKind, Severity, decode_event, make_event
from leyline.codec import BatchEvent
from leyline.events import MAX_TS_AHEAD_S, MIN_TS
from leyline.kinds import SERVER_ONLY_KINDS
from leyline.text import scrub_json
from nissa_server.runs import RunState, Stream
from nissa_server.store import sql
from nissa_server.store.conn import Conn
from nissa_server.store.model import EventWrite, Row
from nissa_server.store.sql import EFFECT_KINDS

_encoder = msgspec.json.Encoder()
_wire = msgspec.json.Decoder(BatchEvent)
_SEVERITY = {s.value: s.rank for s in Severity}
_EFFECT_KINDS = frozenset(k.value for k in EFFECT_KINDS)


def body_of(event: BatchEvent) -> bytes:
    """The event as stored: its JSON, each control character in any of its strings replaced by U+FFFD
    (``leyline.text.scrub_json``), the same on every store: a NUL because PostgreSQL cannot keep one in a text (and
    names, labels and series keys are texts); the others so that no viewer is sent an escape sequence a run wrote
    (the console and the web page show what they still find as text, too)."""
    return scrub_json(_encoder.encode(event))


class BatchRejected(ValueError):
    """A batch that breaks the ingest rules; the connection that sent it is closed."""

    def __init__(self, reason: str, *, too_large: bool = False) -> None:
        super().__init__(reason)
        self.too_large = too_large


def check_batch(events: list[BatchEvent], run_id: str, rank: int, max_events: int,
                payloads: list[AnyPayload] | None = None, now: float | None = None) -> None:
    """Refuse a batch that breaks the ingest rules: too many events, another run's or rank's, seqs not
    increasing, a ``ts`` no clock had (before 2000, or more than a day past the server's ``now``), or what only
    the server says (``leyline.kinds.SERVER_ONLY_KINDS``; a command ``queued`` or ``expired``, from ``payloads``)."""
    if len(events) > max_events:
        raise BatchRejected(f"batch of {len(events)} events exceeds the limit of {max_events}", too_large=True)
    latest = (time.time() if now is None else now) + MAX_TS_AHEAD_S
    previous = 0
    for i, event in enumerate(events):
        if event.run_id != run_id or event.rank != rank:
            raise BatchRejected(
                f"event for run {event.run_id!r} rank {event.rank} on a connection for run {run_id!r} rank {rank}"
            )
        if event.seq <= previous:  # a seq twice in one batch would escape the check of repeats
            raise BatchRejected(f"seq {event.seq} after seq {previous}: seqs must increase within a batch")
        previous = event.seq
        if not MIN_TS <= event.ts <= latest:  # NaN too
            raise BatchRejected(f"seq {event.seq}: ts {event.ts:.6g} is not a time: from 2000-01-01 to a day past the "
                                f"server's clock")
        if event.kind in _SERVERS_WORD:
            _check_authored(event, payloads[i] if payloads is not None else None)


_SERVERS_WORD = SERVER_ONLY_KINDS | {EventKind.COMMAND_STATUS}
"""Kinds whose events a trainer may not send (all of them), or not with every payload (a command's status)."""


def _check_authored(event: BatchEvent, payload: AnyPayload | None) -> None:
    if event.kind in SERVER_ONLY_KINDS:
        raise BatchRejected(f"seq {event.seq}: only the server writes {event.kind} events")
    if isinstance(payload, CommandStatusChanged) and payload.status.by_server:
        raise BatchRejected(f"seq {event.seq}: only the server says a command is {payload.status.value}")


def repeats(stream: Stream, events: list[BatchEvent]) -> list[BatchEvent]:
    """The events of a batch (seqs increasing) whose seq the stream has already accepted."""
    if not events or (events[0].seq > stream.contiguous and not stream.ahead):
        return []
    return [e for e in events if e.seq <= stream.contiguous or e.seq in stream.ahead]


def _encode_checked(events: list[BatchEvent], max_event_bytes: int) -> tuple[list[bytes], bool]:
    """The events' bodies (``body_of``), and whether any control character was replaced in them."""
    encoded = [_encoder.encode(e) for e in events]
    bodies, replaced = encoded, False
    if scrub_json(joined := b"".join(encoded)) != joined:  # one scan of them all rules the usual batch out at once
        bodies = [scrub_json(b) for b in encoded]
        replaced = True  # not where the characters \u0000 were text, an escaped backslash before them
    if bodies and max(map(len, bodies)) > max_event_bytes:
        seq, size = next((e.seq, len(b)) for e, b in zip(events, bodies, strict=True) if len(b) > max_event_bytes)
        raise BatchRejected(f"event seq {seq} is {size} bytes, over the limit of {max_event_bytes}", too_large=True)
    return bodies, replaced


def build_write(run: RunState, rank: int, stream: Stream, events: list[BatchEvent], max_event_bytes: int,
                *, session: str | None, payloads: list[AnyPayload] | None = None) -> tuple[EventWrite, int]:
    """The write for the new events of ``events`` and how many were duplicates.

    ``events`` are validated already (payloads included); each is stored as the canonical envelope
    around its payload's JSON. Nothing changes if any event is too large, so a rejected batch leaves
    the stream as it was. This is the server's per-event hot path: no enum hashing, the usual frame in one
    comprehension.
    ``payloads``, the events' payloads as validated, go with the write (``EventWrite.decoded``) where every
    event is new and stored as sent (no NUL replaced).
    """
    bodies, replaced = _encode_checked(events, max_event_bytes)
    contiguous = stream.contiguous
    if events and not stream.ahead and events[0].seq == contiguous + 1 and events[-1].seq == contiguous + len(events):
        # The usual frame: every event the next of its stream (seqs increase within a batch: one run of them).
        rows: list[Row] = [(e.seq, e.kind, _SEVERITY[e.severity._value_], body)
                           for e, body in zip(events, bodies, strict=True)]
        stream.contiguous = contiguous = events[-1].seq
        stream.last_seq = last = max(stream.last_seq, contiguous)
    else:
        rows = _accepted(stream, events, bodies)
        contiguous, last = stream.contiguous, stream.last_seq
    kinds = dict(Counter(map(itemgetter(1), rows)))
    effects: list[Event] = []
    if not _EFFECT_KINDS.isdisjoint(kinds):
        effects = [decode_event(row[3]) for row in rows if row[1] in _EFFECT_KINDS]
    final = events[-1] if rows else None
    write = EventWrite(run=run, rank=rank, stream=stream, session=session, rows=rows, contiguous=contiguous,
                       last_seq=last, kinds=kinds, effects=effects, touch=True,
                       last_step=final.step if final else 0, last_epoch=final.epoch if final else 0)
    if payloads is not None and len(payloads) == len(rows) == len(events) and not replaced:  # the usual frame
        write.decoded = list(zip(events, payloads, strict=True))
    return write, len(events) - len(rows)


def _accepted(stream: Stream, events: list[BatchEvent], bodies: list[bytes]) -> list[Row]:
    """The rows of the events the stream accepts (a duplicate is dropped), the stream moved past them."""
    rows: list[Row] = []
    for event, body in zip(events, bodies, strict=True):
        if stream.accept(event.seq):
            rows.append((event.seq, event.kind, _SEVERITY[event.severity._value_], body))
    return rows


def add_server_event(conn: Conn, write: EventWrite, payload: AnyPayload, severity: Severity | None = None) -> None:
    """Inside the transaction: the server's own event about ``write.run`` (rank ``SERVER_RANK``), at the
    next seq of the server's stream of that run, whichever server writes it."""
    run = write.run
    progress = sql.run_progress(conn, run.run_key)
    step, epoch = (progress[1], progress[2]) if progress else (0, 0)
    seq = max(sql.next_server_seq(conn, run.run_key, SERVER_RANK), write.last_seq + 1)  # a second one: the next
    event = make_event(payload, run_id=run.run_id, seq=seq, ts=time.time(), rank=SERVER_RANK, step=step,
                       epoch=epoch, severity=severity)
    wire = _wire.decode(_encoder.encode(event))
    body = body_of(wire)
    kind = wire.kind
    write.rows.append((seq, kind, _SEVERITY[wire.severity._value_], body))
    write.kinds[kind] = write.kinds.get(kind, 0) + 1
    if kind in _EFFECT_KINDS:
        write.effects.append(decode_event(body))
    write.contiguous = write.last_seq = seq
