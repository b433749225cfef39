"""``SweepService``: what the routes and the server's background loop do with sweeps. The store is the source of
truth: every decision is taken in the writer's transaction (``decide``, ``leases``), and what must reach a run
is sent afterwards as a command, with an Idempotency-Key so that a decision sent twice makes one command."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time

from leyline import CheckpointRequest, EscalateRequest, RestoreRequest, StopRequest
from leyline.sweeps import Lease, LeaseGranted, SweepInfo, SweepSpec
from nissa_server.commands import CommandError, CommandService
from nissa_server.store import Store
from nissa_server.store import sweeps_sql as q
from nissa_server.store.conn import Conn
from nissa_server.sweeps import leases
from nissa_server.sweeps.decide import Ask, best_trial, decide, stop_trials

logger = logging.getLogger(__name__)
MAX_LISTED = 200
MIN_GAP_S = 0.1
"""Least time between two rounds of decisions."""


def new_sweep_id(name: str) -> str:
    """``<name in lower case, 24 characters at most>-<6 hex>``: readable in the runs it names."""
    stem = "".join(c if c.isalnum() else "-" for c in name.lower())[:24].strip("-") or "sweep"
    return f"{stem}-{secrets.token_hex(3)}"


def info(conn: Conn, sweep_id: str) -> SweepInfo | None:
    sweep = q.get_sweep(conn, sweep_id)
    if sweep is None:
        return None
    rows = q.trials(conn, sweep_id)
    lineage: dict[int, list] = {}
    for e in q.exploits(conn, sweep_id):
        lineage.setdefault(e.trial_id, []).append(e.exploit)
    return SweepInfo(sweep_id=sweep.sweep_id, name=sweep.name, project=sweep.project, status=sweep.status,  # type: ignore[arg-type]
                     method=sweep.spec.method, metric=sweep.spec.metric, spec=sweep.spec, created_at=sweep.created_at,
                     trials=[r.public(lineage.get(r.trial_id, [])) for r in rows], best_trial=best_trial(sweep, rows),
                     message=sweep.message)


def _listed(conn: Conn, limit: int) -> list[SweepInfo]:
    return [i for s in q.list_sweeps(conn, limit) if (i := info(conn, s.sweep_id)) is not None]


class SweepService:
    def __init__(self, store: Store, commands: CommandService, *, lease_s: float = 30.0) -> None:
        self._store = store
        self._commands = commands
        self.lease_s = lease_s
        """How long a trial's lease lasts unless its agent renews it (agents renew three times as often)."""
        self._woken: asyncio.Event | None = None
        self._resumed = False

    async def create(self, spec: SweepSpec) -> str:
        sweep_id = new_sweep_id(spec.name)
        now = time.time()
        await self._store.call(lambda conn: q.insert_sweep(conn, sweep_id, spec, now))
        logger.info("sweep %s created: %s, %d trials", sweep_id, spec.method, spec.budget)
        return sweep_id

    async def listed(self, limit: int = MAX_LISTED) -> list[SweepInfo]:
        return await self._store.read(_listed, limit)

    async def get(self, sweep_id: str) -> SweepInfo | None:
        return await self._store.read(info, sweep_id)

    async def lease(self, sweep_id: str, req: Lease) -> LeaseGranted | None:
        now = time.time()
        return await self._store.call(lambda conn: leases.lease(conn, sweep_id, req, now, self.lease_s))

    async def stop(self, sweep_id: str, reason: str) -> SweepInfo | None:
        """End the sweep ``stopped``: queued trials too, running ones through their runs' ``stop`` command."""
        now = time.time()

        def end(conn: Conn) -> list[Ask] | None:
            sweep = q.get_sweep(conn, sweep_id, lock=True)
            if sweep is None:
                return None
            asks = stop_trials(conn, sweep, q.trials(conn, sweep_id), reason)
            q.end_sweep(conn, sweep_id, "stopped", reason, now)
            return asks

        asks = await self._store.call(end)
        if asks is None:
            return None
        for ask in asks:
            await self._send(ask)
        return await self.get(sweep_id)

    async def tick(self) -> None:
        """Every running sweep's decisions, and the commands they need."""
        for sweep_id in await self._store.read(q.running_sweeps):
            for ask in await self._decide(sweep_id):
                await self._send(ask)

    async def _decide(self, sweep_id: str) -> list[Ask]:
        return await self._store.call(lambda conn: decide(conn, sweep_id))

    def wake(self) -> None:
        """A command's status moved: take the decisions now rather than at the next interval (an exploit goes
        from checkpoint to restore as soon as the checkpoint is shared)."""
        if self._woken is not None:
            self._woken.set()

    async def resume(self) -> int:
        """A server starting gives every running trial a whole lease from now: while no server answered, no agent
        could renew one, and a trial running all along is not lost for that. How many leases it extended."""
        until = time.time() + self.lease_s
        extended: int = await self._store.call(lambda conn: q.extend_leases(conn, until))
        if extended:
            logger.info("sweeps: %d running trials given %.0f s for their agents to renew their leases",
                        extended, self.lease_s)
        return extended

    async def loop(self, interval_s: float) -> None:
        """One round of decisions, ``interval_s`` after the last or sooner when woken (the first, after
        ``resume``)."""
        if not self._resumed:
            await self.resume()
            self._resumed = True
        if self._woken is None:
            self._woken = asyncio.Event()
        await asyncio.sleep(MIN_GAP_S)  # a burst of status changes makes one round, not one each
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken.wait(), interval_s)
        self._woken.clear()
        await self.tick()

    async def _send(self, ask: Ask) -> None:
        req = _request(ask)
        try:
            command_id, _, _ = await self._commands.escalate(req, ask.key)
        except CommandError as err:
            why = err.detail
            logger.info("sweep: %s of run %s not sent: %s", ask.kind, ask.run_id, why)
            if ask.kind != "stop":
                await self._store.call(lambda conn: _exploit_failed(conn, ask, why))
            return
        if ask.kind != "stop":
            await self._store.call(lambda conn: _exploit_sent(conn, ask, command_id))


def _request(ask: Ask) -> EscalateRequest:
    reason = ask.reason[:500]
    if ask.kind == "checkpoint":
        return CheckpointRequest(run_id=ask.run_id, reason=reason, share=True)
    if ask.kind == "restore":
        return RestoreRequest(run_id=ask.run_id, reason=reason, source_run_id=ask.source_run_id,
                              artifact=ask.artifact, values=dict(ask.values or {}))
    return StopRequest(run_id=ask.run_id, reason=reason)


def _exploit_row(conn: Conn, ask: Ask) -> tuple[str, q.ExploitRow] | None:
    sweep_id = ask.sweep_id
    row = next((e for e in q.exploits(conn, sweep_id) if e.trial_id == ask.trial_id and e.n == ask.n), None)
    return None if row is None else (sweep_id, row)


def _exploit_sent(conn: Conn, ask: Ask, command_id: str) -> None:
    found = _exploit_row(conn, ask)
    if found is not None:
        sweep_id, row = found
        if ask.kind == "checkpoint":
            row.checkpoint_id = command_id
        else:
            row.restore_id = command_id
        q.update_exploit(conn, sweep_id, row)


def _exploit_failed(conn: Conn, ask: Ask, why: str) -> None:
    found = _exploit_row(conn, ask)
    if found is not None and found[1].exploit.status == "pending":
        sweep_id, row = found
        row.exploit.status, row.exploit.message = "failed", f"{ask.kind} refused: {why}"[:500]
        q.update_exploit(conn, sweep_id, row)
