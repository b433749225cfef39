"""Websocket frames of ``/ws/ingest`` and ``/ws/watch``: JSON text objects tagged by ``type``.

Ingest, trainer → server: ``hello`` once (with the run's stream secret), then ``events`` batches.
Ingest, server → trainer: ``welcome`` (the highest contiguous seq already stored), ``ack``
(highest contiguous seq durably stored), ``command`` (an escalation to apply).
Watch, server → watcher: ``events`` batches, each with the cursor of its last event.

Both ends of an ingest connection say which ``PROTOCOL`` they speak (``hello.protocol``, ``welcome.protocol``;
left out: 1) and each writes its frames for the other's: protocol 2's ``command`` frame carries the typed
request; protocol 1's was flat (``leyline.frames_v1``), and is still written to and read from a peer of 1.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from leyline.commands import Command
from leyline.events import Event, Rank, RunId
from leyline.payloads import RunName

MAX_FRAME_BYTES = 4 * 1024 * 1024
MAX_BATCH_EVENTS = 5000
MAX_EVENT_BYTES = 256 * 1024

# Websocket close codes (4000-4999 are the application's own).
CLOSE_BAD_FRAME = 4400
CLOSE_UNAUTHORIZED = 4401
CLOSE_DELETED = 4404  # the run was deleted on the server: its stream is refused for good, final, do not retry
CLOSE_FORBIDDEN = 4403  # the hello's stream secret is missing or is not the run's: final, do not retry
CLOSE_LAGGING = 4408  # a watcher too far behind; reconnect from its cursor
CLOSE_SUPERSEDED = 4409  # another connection took over this run and rank
CLOSE_IDLE = 4410  # an ingest connection sent nothing for too long; reconnect when there is something to send
CLOSE_TOO_LARGE = 4413
CLOSE_UNSUPPORTED = 4415
CLOSE_CONFLICT = 4422  # a seq already stored, sent again with other content: final, do not retry
CLOSE_TOO_MANY = 4429  # the server has as many watchers as it takes; try again later

PROTOCOL = 2
"""The ingest protocol this side speaks: 2, a command frame carries the command's typed request."""

STREAM_SECRET_HEADER = "X-Nissa-Stream-Secret"
"""HTTP header of an artifact upload that carries the run's stream secret (only its trainer may upload)."""

StreamSecret = Annotated[str, msgspec.Meta(min_length=32, max_length=128, pattern=r"^[A-Za-z0-9_-]+$(?!\n)")]
"""The run's stream secret: it binds the run's stream to whoever created it (the trainer keeps it in
the run directory); the server keeps only its hash."""


class Hello(msgspec.Struct, tag="hello", tag_field="type", kw_only=True):
    """First ingest frame: which run and rank this connection speaks for, and the proof that it may."""

    run_id: RunId
    rank: Rank = 0
    name: RunName = ""
    last_seq: int = 0  # highest seq the trainer has logged so far
    secret: StreamSecret | None = None
    """The run's stream secret; the server refuses a hello without the one the run was created with."""
    upload: bool = False
    """A late upload of a log, not a live trainer: it gets no commands and does not make the run live."""
    protocol: int = 1
    """The ingest protocol the trainer speaks (``PROTOCOL``; left out: 1, a trainer from before it was said)."""


class EventBatch(msgspec.Struct, tag="events", tag_field="type", kw_only=True):
    """A batch of events in seq order (ingest), or of stored events for a watcher."""

    events: list[Event]
    cursor: int = 0  # watch only: server cursor of the last event, to resume with ``after_id``


class Welcome(msgspec.Struct, tag="welcome", tag_field="type", kw_only=True):
    """Answer to hello: send from ``last_seq + 1``."""

    last_seq: int
    server_version: str = ""
    protocol: int = 1
    """The ingest protocol the server speaks (``PROTOCOL``; left out: 1, a server from before it was said)."""


class Ack(msgspec.Struct, tag="ack", tag_field="type", kw_only=True):
    """Every event up to ``seq`` is durably stored."""

    seq: int


class CommandFrame(msgspec.Struct, tag="command", tag_field="type", kw_only=True):
    """A command for the trainer to apply at its next step boundary."""

    command: Command


IngestClientFrame = Hello | EventBatch
IngestServerFrame = Welcome | Ack | CommandFrame
