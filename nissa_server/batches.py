"""Turn validated events into a store write: de-duplicate, encode once, note side effects."""

from __future__ import annotations

import time

import msgspec

from leyline import SERVER_RANK, Event, Payload, RunStatus, Severity, make_event
from leyline.enums import EventKind
from nissa_server.runs import RunState
from nissa_server.store import EventWrite, Row, Store
from nissa_server.writes import EFFECT_KINDS

_encoder = msgspec.json.Encoder()
_SEVERITY = {s: s.rank for s in Severity}


class BatchRejected(ValueError):
    """A batch that breaks the ingest rules; the connection that sent it is closed."""

    def __init__(self, reason: str, *, too_large: bool = False) -> None:
        super().__init__(reason)
        self.too_large = too_large


def check_batch(events: list[Event], run_id: str, rank: int, max_events: int) -> None:
    if len(events) > max_events:
        raise BatchRejected(f"batch of {len(events)} events exceeds the limit of {max_events}", too_large=True)
    for event in events:
        if event.run_id != run_id or event.rank != rank:
            raise BatchRejected(
                f"event for run {event.run_id!r} rank {event.rank} on a connection for run {run_id!r} rank {rank}"
            )


def build_write(store: Store, run: RunState, rank: int, events: list[Event], max_event_bytes: int,
                *, touch: bool = True) -> tuple[EventWrite, int]:
    """The write for the new events of ``events`` and how many were duplicates.

    Nothing changes if any event is too large, so a rejected batch leaves the stream as it was.
    """
    bodies = [_encoder.encode(e) for e in events]
    for event, body in zip(events, bodies):
        if len(body) > max_event_bytes:
            raise BatchRejected(
                f"event seq {event.seq} is {len(body)} bytes, over the limit of {max_event_bytes}", too_large=True
            )
    stream = run.stream(rank)
    key = run.run_key
    next_id = store.next_id
    rows: list[Row] = []
    kinds: dict[str, int] = {}
    effects: list[Event] = []
    for event, body in zip(events, bodies):
        if not stream.accept(event.seq):
            continue
        kind = event.kind.value
        rows.append((next_id, key, rank, event.seq, kind, _SEVERITY[event.severity], event.ts, body))
        next_id += 1
        kinds[kind] = kinds.get(kind, 0) + 1
        if event.kind in EFFECT_KINDS:
            effects.append(event)
    store.next_id = next_id
    if rows and touch:
        last = events[-1]
        run.last_step, run.last_epoch = max(run.last_step, last.step), max(run.last_epoch, last.epoch)
    if touch:
        run.touch()
    if any(e.kind is EventKind.RUN_FINISHED for e in effects):
        run.status = RunStatus.FINISHED
    write = EventWrite(run=run, rank=rank, rows=rows, contiguous=stream.contiguous, last_seq=stream.last_seq,
                       kinds=kinds, effects=effects, touch=touch)
    return write, len(events) - len(rows)


def server_event(store: Store, run: RunState, payload: Payload, severity: Severity | None = None) -> EventWrite:
    """An event the server authors about ``run`` (rank ``SERVER_RANK``, its own contiguous seq)."""
    seq = run.stream(SERVER_RANK).last_seq + 1
    event = make_event(payload, run_id=run.run_id, seq=seq, ts=time.time(), rank=SERVER_RANK,
                       step=run.last_step, epoch=run.last_epoch, severity=severity)
    write, _ = build_write(store, run, SERVER_RANK, [event], max_event_bytes=1 << 30, touch=False)
    return write
