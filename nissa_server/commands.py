"""Escalations: create, route to the run's ingest connections, expire them.

Decisions (idempotency, liveness, the cap on open commands) are taken inside the writer's transaction,
against the database, so two requests racing each other cannot both pass a limit, on one server or on
several; a command reaches the trainer from whichever server holds its connection.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

import msgspec

from leyline import (
    SERVER_RANK,
    CallRequest,
    CommandAction,
    CommandRecord,
    CommandStatus,
    CommandStatusChanged,
    EscalateRequest,
    ProfileRequest,
    RunStarted,
    RunStatus,
    Severity,
)
from leyline.calls import check_call, unprofilable
from leyline.commands import is_trainer_command
from nissa_server.batches import add_server_event
from nissa_server.runs import RunState
from nissa_server.store import EventWrite, Store, queries, sql
from nissa_server.store.conn import Conn

logger = logging.getLogger(__name__)
_encoder = msgspec.json.Encoder()


class CommandError(Exception):
    """An escalation refused, with the HTTP status that says why."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.detail = detail


_started = msgspec.json.Decoder(RunStarted)


def _declaration(conn: Conn, run: RunState) -> RunStarted | None:
    """The run's ``run_started`` (rank 0's), None before it came."""
    row = conn.execute("SELECT config FROM runs WHERE run_key = ?", (run.run_key,)).fetchone()
    return _started.decode(row[0]) if row is not None and row[0] else None


def _undeclared(conn: Conn, run: RunState, req: EscalateRequest) -> CommandError | None:
    """What the run's declaration refuses: a ``call`` of a command it did not declare, or with arguments it
    does not take; a profile window of target ``update`` over a phase it does not have."""
    if isinstance(req, ProfileRequest) and req.target == "update":
        started = _declaration(conn, run)
        why = unprofilable(started.phases if started is not None else None, req.phase)
        return None if why is None else CommandError(422, why)
    if isinstance(req, CallRequest):
        started = _declaration(conn, run)
        try:
            check_call(started.commands if started is not None else [], req.name, req.args)
        except ValueError as err:
            return CommandError(422, str(err))
    return None


class CommandService:
    def __init__(self, store: Store, *, ttl_s: float, max_open: int, stacks_answer_s: float = 15.0) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._stacks_answer_s = stacks_answer_s
        self._max_open = max_open
        self._sent: dict[tuple[int, str], set[str]] = {}
        """(run key, command id) → the sessions here it went down."""

    async def escalate(self, req: EscalateRequest, key: str | None) -> tuple[str, bool, CommandStatus]:
        """Queue a command; returns its id, whether it is new (False: an idempotent retry) and its status."""
        request = _encoder.encode(req)
        run = await self._store.find_run(req.run_id)
        if run is None:
            raise CommandError(404, f"unknown run {req.run_id!r}")

        def prepare(conn: Conn, write: EventWrite) -> None:
            if key is not None:
                earlier = sql.command_for_key(conn, key)
                if earlier is not None:
                    write.result = (CommandError(422, "Idempotency-Key was already used with a different request "
                                                      "body") if earlier[1] != request
                                    else (earlier[0], False, CommandStatus(earlier[2])))
                    return
            refused = _undeclared(conn, run, req)
            if refused is not None:
                write.result = refused
                return
            queued = self.queue_in(conn, write, run, req, key)
            write.result = queued if isinstance(queued, CommandError) else (queued, True, CommandStatus.QUEUED)

        write = await self._store.submit_and_wait(EventWrite(run=run, rank=SERVER_RANK, prepare=prepare))
        if isinstance(write.result, CommandError):
            raise write.result
        return write.result

    def queue_in(self, conn: Conn, write: EventWrite, run: RunState, req: EscalateRequest,
                 key: str | None = None) -> str | CommandError:
        """Inside the writer's transaction of ``write`` (a server event write of ``run``): queue ``req``;
        returns its command id, or why the run cannot take it."""
        refused = self._refusal(conn, run)
        if refused is not None:
            return refused
        now = time.time()
        command_id = uuid.uuid4().hex
        record = CommandRecord(command_id=command_id, run_id=run.run_id, action=req.action, request=req,
                               status=CommandStatus.QUEUED, created_at=now, updated_at=now)
        sql.insert_command(conn, run.run_key, record, _encoder.encode(req), key)
        add_server_event(conn, write, CommandStatusChanged(command_id=command_id, action=req.action,
                                                           status=CommandStatus.QUEUED, message=req.reason or ""))
        return command_id

    def _refusal(self, conn: Conn, run: RunState) -> CommandError | None:
        progress = sql.run_progress(conn, run.run_key)
        if progress is None:
            return CommandError(404, f"unknown run {run.run_id!r}")
        status = RunStatus(progress[0])
        if not status.running:
            return CommandError(409, f"run {run.run_id!r} is {status.value}, not live")
        if sql.open_command_count(conn, run.run_key) >= self._max_open:
            return CommandError(429, f"run {run.run_id!r} already has {self._max_open} open commands")
        return None

    async def dispatch(self, run: RunState) -> None:
        """Send every still-queued command of ``run`` down each of its connections here that has not had it."""
        if not run.connections:
            return
        queued = await self._store.read(queries.queued_commands, run.run_key)
        waiting = {(run.run_key, c.command_id) for c in queued}
        for key in [k for k in self._sent if k[0] == run.run_key and k not in waiting]:
            del self._sent[key]  # delivered or over: forget where it went
        for command in queued:
            sent = self._sent.setdefault((run.run_key, command.command_id), set())
            for conn in list(run.connections.values()):
                if conn.session not in sent:
                    sent.add(conn.session)
                    conn.send_command(command)

    async def expire_due(self, now: float | None = None) -> int:
        """Mark commands still queued past their time to live as ``expired`` (once, whichever server)."""
        now = time.time() if now is None else now
        due = await self._store.read(queries.due_commands, now - self._ttl_s)
        expired = 0
        for command_id, run_id, action in due:
            run = await self._store.find_run(run_id)
            if run is None or is_trainer_command(command_id):
                continue
            change = CommandStatusChanged(command_id=command_id, action=CommandAction(action),
                                          status=CommandStatus.EXPIRED,
                                          message=f"not delivered within {self._ttl_s:g} s")
            await self._server_status(run, change, lambda status: status == CommandStatus.QUEUED.value)
            expired += 1
        return expired + await self._close_unanswered_stacks(now)

    async def _close_unanswered_stacks(self, now: float) -> int:
        """``stacks`` commands some rank never answered: failed, naming the ranks that did not (what the ranks
        that did answer stays in the command's ``ranks``; a late answer still lands there)."""
        closed = 0
        for command_id, run_id, world, answered in await self._store.read(queries.unanswered_stacks,
                                                                          now - self._stacks_answer_s):
            run = await self._store.find_run(run_id)
            silent = [r for r in range(world) if r not in answered]
            if run is None or not silent:
                continue
            names = ", ".join(map(str, silent))
            change = CommandStatusChanged(
                command_id=command_id, action=CommandAction.STACKS, status=CommandStatus.FAILED,
                message=f"no answer from rank{'s' if len(silent) > 1 else ''} {names} within "
                        f"{self._stacks_answer_s:g} s: stopped, or none of its Python threads can run (its stack "
                        f"watchdog, --stack-watchdog, writes their stacks to its run directory)")
            await self._server_status(run, change, lambda status: status is not None
                                      and not CommandStatus(status).terminal)
            closed += 1
        return closed

    async def _server_status(self, run: RunState, change: CommandStatusChanged,
                             still: Callable[[str | None], bool]) -> None:
        """The server's own status change of a command, stored only if its status (read in the same
        transaction) is ``still`` as it was when the change was decided (the run may have answered meanwhile)."""
        def prepare(conn: Conn, write: EventWrite) -> None:
            if still(sql.command_status(conn, change.command_id)):
                add_server_event(conn, write, change, Severity.WARNING)

        await self._store.submit_and_wait(EventWrite(run=run, rank=SERVER_RANK, prepare=prepare))
