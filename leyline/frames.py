"""Websocket frames of ``/ws/ingest`` and ``/ws/watch``: JSON text objects tagged by ``type``.

Ingest, trainer → server: ``hello`` once, then ``events`` batches.
Ingest, server → trainer: ``welcome`` (the highest contiguous seq already stored), ``ack``
(highest contiguous seq durably stored), ``command`` (an escalation to apply).
Watch, server → watcher: ``events`` batches, each with the cursor of its last event.
"""

from __future__ import annotations

import msgspec

from leyline.commands import Command
from leyline.events import Event, Rank, RunId

MAX_FRAME_BYTES = 4 * 1024 * 1024
MAX_BATCH_EVENTS = 5000
MAX_EVENT_BYTES = 256 * 1024

# Websocket close codes (4000-4999 are the application's own).
CLOSE_BAD_FRAME = 4400
CLOSE_UNAUTHORIZED = 4401
CLOSE_TOO_LARGE = 4413
CLOSE_UNSUPPORTED = 4415
CLOSE_LAGGING = 4408  # a watcher too far behind; reconnect from its cursor
CLOSE_SUPERSEDED = 4409  # another connection took over this run and rank


class Hello(msgspec.Struct, tag="hello", tag_field="type", kw_only=True):
    """First ingest frame: which run and rank this connection speaks for."""

    run_id: RunId
    rank: Rank = 0
    name: str = ""
    last_seq: int = 0  # highest seq the trainer has logged so far


class EventBatch(msgspec.Struct, tag="events", tag_field="type", kw_only=True):
    """A batch of events in seq order (ingest), or of stored events for a watcher."""

    events: list[Event]
    cursor: int = 0  # watch only: server cursor of the last event, to resume with ``after_id``


class Welcome(msgspec.Struct, tag="welcome", tag_field="type", kw_only=True):
    """Answer to hello: send from ``last_seq + 1``."""

    last_seq: int
    server_version: str = ""


class Ack(msgspec.Struct, tag="ack", tag_field="type", kw_only=True):
    """Every event up to ``seq`` is durably stored."""

    seq: int


class CommandFrame(msgspec.Struct, tag="command", tag_field="type", kw_only=True):
    """A command for the trainer to apply at its next step boundary."""

    command: Command


IngestClientFrame = Hello | EventBatch
IngestServerFrame = Welcome | Ack | CommandFrame
