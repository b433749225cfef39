"""Escalations: create, route to the run's ingest connections, follow their status, expire them.

Decisions (idempotency, limits, liveness) are taken in memory on the event loop, so two requests
racing each other cannot both pass a limit; the database keeps the record and its history.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from leyline import (
    Command,
    CommandRecord,
    CommandStatus,
    CommandStatusChanged,
    EscalateRequest,
    RunStatus,
    SERVER_RANK,
    Severity,
)
from leyline.commands import is_trainer_command
from nissa_server import batches, writes
from nissa_server.runs import RunState
from nissa_server.store import EventWrite, Store

logger = logging.getLogger(__name__)
_encoder = msgspec.json.Encoder()


class CommandError(Exception):
    """An escalation refused, with the HTTP status that says why."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.detail = detail


class CommandSink(Protocol):
    """Where a command is sent: an ingest connection."""

    def send_command(self, command: Command) -> None: ...


@dataclass
class OpenCommand:
    command: Command
    status: CommandStatus
    sent_to: set[int] = field(default_factory=set)  # ids of connections it went down


class CommandService:
    def __init__(self, store: Store, *, ttl_s: float, max_open: int) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._max_open = max_open
        self.open: dict[str, OpenCommand] = {}
        self._keys: dict[str, tuple[str, bytes]] = {}

    def load(self, records: Iterable[CommandRecord], keys: Iterable[tuple[str, str, bytes]]) -> None:
        for rec in records:
            if is_trainer_command(rec.command_id):
                continue  # the trainer applies its own commands; the server only keeps their record
            command = Command(command_id=rec.command_id, run_id=rec.run_id, action=rec.action, epochs=rec.epochs,
                              batches=rec.batches, through_update=rec.through_update, target=rec.target,
                              reason=rec.reason,
                              created_at=rec.created_at)
            self.open[rec.command_id] = OpenCommand(command=command, status=rec.status)
        self._keys = {key: (command_id, request) for key, command_id, request in keys}

    def open_for(self, run_id: str) -> list[OpenCommand]:
        return [c for c in self.open.values() if c.command.run_id == run_id]

    def replay_of(self, request: bytes, key: str | None) -> str | None:
        """The command an earlier request with this ``Idempotency-Key`` created, if any."""
        if key is None or key not in self._keys:
            return None
        command_id, first = self._keys[key]
        if first != request:
            raise CommandError(422, "Idempotency-Key was already used with a different request body")
        return command_id

    async def escalate(self, req: EscalateRequest, run: RunState | None, key: str | None) -> tuple[str, bool]:
        """Queue a command; returns its id and whether it is new (False: an idempotent retry)."""
        request = _encoder.encode(req)
        earlier = self.replay_of(request, key)
        if earlier is not None:
            return earlier, False
        if run is None:
            raise CommandError(404, f"unknown run {req.run_id!r}")
        if run.status is not RunStatus.LIVE:
            raise CommandError(409, f"run {req.run_id!r} is {run.status.value}, not live")
        if len(self.open_for(run.run_id)) >= self._max_open:
            raise CommandError(429, f"run {req.run_id!r} already has {self._max_open} open commands")
        await self._store.resync(run, SERVER_RANK)
        now = time.time()
        command = Command(command_id=uuid.uuid4().hex, run_id=run.run_id, action=req.action, epochs=req.epochs,
                          batches=req.batches, through_update=req.through_update, target=req.target,
                          reason=req.reason,
                          created_at=now)
        self.open[command.command_id] = OpenCommand(command=command, status=CommandStatus.QUEUED)
        if key is not None:
            self._keys[key] = (command.command_id, request)
        record = CommandRecord(command_id=command.command_id, run_id=run.run_id, action=req.action,
                               status=CommandStatus.QUEUED, created_at=now, updated_at=now)
        def build() -> EventWrite:
            write = self._status_event(run, command, CommandStatus.QUEUED, req.reason or "")
            write.before = lambda conn: writes.insert_command(conn, run.run_key, record, request, key)
            return write

        try:
            await self._store.submit_and_wait(build)
        except BaseException:  # failed or cancelled, the command was not taken: forget it, re-raise
            self.open.pop(command.command_id, None)
            if key is not None:
                self._keys.pop(key, None)
            raise
        self.dispatch(run)
        return command.command_id, True

    def _status_event(self, run: RunState, command: Command, status: CommandStatus, message: str) -> EventWrite:
        payload = CommandStatusChanged(command_id=command.command_id, action=command.action, status=status,
                                       message=message)
        severity = Severity.WARNING if status is CommandStatus.EXPIRED else None
        return batches.server_event(run, payload, severity)

    def dispatch(self, run: RunState) -> None:
        """Send every still-queued command of ``run`` down each ingest connection that has not had it."""
        for open_ in self.open_for(run.run_id):
            if open_.status is not CommandStatus.QUEUED:
                continue
            for conn in list(run.connections.values()):
                if id(conn) not in open_.sent_to:
                    open_.sent_to.add(id(conn))
                    conn.send_command(open_.command)  # type: ignore[attr-defined]

    def observe(self, write: EventWrite) -> None:
        """Follow status changes as they are stored (the trainer's reports and the server's own)."""
        for event in write.effects:
            change = event.payload
            if not isinstance(change, CommandStatusChanged):
                continue
            open_ = self.open.get(change.command_id)
            if open_ is None or open_.command.run_id != event.run_id:
                continue
            if change.status.terminal:
                del self.open[change.command_id]
            else:
                open_.status = change.status

    async def expire_due(self, registry_get, now: float | None = None) -> int:
        """Mark commands still queued past their time to live as ``expired``."""
        now = time.time() if now is None else now
        due = [c for c in self.open.values()
               if c.status is CommandStatus.QUEUED and now - c.command.created_at > self._ttl_s]
        for open_ in due:
            run = registry_get(open_.command.run_id)
            if run is None:
                continue
            await self._store.resync(run, SERVER_RANK)
            message = f"not delivered within {self._ttl_s:g} s"
            # Leave the open set now so the next sweep does not expire it twice.
            open_.status = CommandStatus.EXPIRED
            await self._store.submit_built(
                lambda run=run, open_=open_: self._status_event(run, open_.command, CommandStatus.EXPIRED, message))
        return len(due)
