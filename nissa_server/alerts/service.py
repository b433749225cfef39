"""The server's alerting: a sweep that opens and resolves alerts, and a deliverer that sends their notices.

Both run as background tasks of the server's lifespan, beside ingest, never in its path: the sweep reads
a snapshot on a reader thread (``engine.read_snapshot``) and writes through the store's writer like any
server event; the deliverer sends on a worker thread (``notify``). An alert opens and resolves inside one
transaction with its ``alert`` event in the run's stream, its notices, and for a hang its ``stacks``
command: with several servers on one database, the first to see a condition opens it and the others
find it open (``store.alerts_sql``), so each alert is sent once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable

from leyline import SERVER_RANK, AlertChanged, Severity, StacksRequest
from leyline.commands import MAX_REASON_CHARS
from leyline.run_keys import stored_key
from nissa_server.alerts.engine import AlertEngine, Firing, Snapshot, Verdict, last_event_id, read_snapshot
from nissa_server.alerts.notify import MAX_ATTEMPTS, RateLimit, backoff_s, send
from nissa_server.alerts.rules import AlertRules, Rule
from nissa_server.batches import add_server_event
from nissa_server.commands import CommandError, CommandService
from nissa_server.metrics import Metrics
from nissa_server.schemas import AlertInfo
from nissa_server.store import EventWrite, Store, alerts_sql
from nissa_server.store.conn import Conn

logger = logging.getLogger(__name__)
CLAIM_S = 120.0
"""How long a claimed notice is this server's to send before another server may take it over."""
_SEVERITY = {"status": Severity.ERROR, "hang": Severity.ERROR, "anomaly": Severity.WARNING,
             "straggler": Severity.WARNING, "threshold": Severity.WARNING, "nan": Severity.ERROR,
             "stale": Severity.WARNING}


class AlertService:
    """See the module docstring."""

    def __init__(self, rules: AlertRules, store: Store, commands: CommandService, metrics: Metrics, *,
                 silent_after_s: float, lost_after_s: float) -> None:
        self.rules = rules
        self._store = store
        self._commands = commands
        self._metrics = metrics
        self._engine = AlertEngine(rules, silent_after_s=silent_after_s)
        self._since = time.time() - lost_after_s - 10.0
        self._limits = {d.name: RateLimit(d.max_per_minute) for d in rules.destinations.values()}
        self._targets = {f"{d.name}/{i}": url for d in rules.destinations.values() for i, url in enumerate(d.urls)}
        self.wake = asyncio.Event()
        self._claimed: list[tuple] = []
        self._owed: list[Callable[[Conn], None]] = []

    @property
    def active(self) -> bool:
        return bool(self.rules.rules)

    def _destinations(self, rule: Rule) -> list[str]:
        return [f"{d.name}/{i}" for d in self.rules.targets(rule) for i in range(len(d.urls))]

    # --- the sweep ------------------------------------------------------------------------------

    async def sweep(self, now: float | None = None) -> None:
        """Open alerts whose conditions hold, resolve those whose conditions ended."""
        if not self.active:
            return
        now = time.time() if now is None else now
        snap = await self._store.read(read_snapshot, self._since, self._engine.after_id, self._engine.series_names)
        seen_upto = self._engine.after_id
        verdict = self._engine.evaluate(snap, now)
        try:
            await self._apply(snap, verdict, now)
        except BaseException:
            self._engine.after_id = seen_upto  # the database failed: the next sweep sees these anomalies again
            raise

    async def _apply(self, snap: Snapshot, verdict: Verdict, now: float) -> None:
        # A series' subject by its stored key: an alert opened under ``val_loss{rank=0}`` (before a run of one rank
        # showed it as ``val_loss``) is the same alert as one firing now under ``val_loss``.
        open_keys = {(rule, run_key, stored_key(subject)): subject for _, run_key, rule, subject, *_ in snap.firing}
        for f in verdict.firing:
            key = (f.rule.name, f.run_key, stored_key(f.subject))
            held = open_keys.get(key)
            if held is not None:
                if f.renewed:
                    await self._store.call(functools.partial(alerts_sql.touch_alert, rule=f.rule.name,
                                                             run_key=f.run_key, subject=held, now=now))
                continue
            open_keys[key] = f.subject
            await self._open(f, now)
        for alert_id, rule, why in verdict.resolved:
            await self._resolve(alert_id, rule, why, now)
        for alert_id, rule, why in verdict.ended:
            await self._resolve(alert_id, rule, why, now, seen_to_end=False)

    async def _open(self, f: Firing, now: float) -> None:
        run = await self._store.find_run(f.run_id)
        if run is None:
            return
        rule = f.rule

        def prepare(conn: Conn, write: EventWrite) -> None:
            write.result = None
            alert_id = alerts_sql.open_alert(conn, run_key=run.run_key, rule=rule.name, condition=rule.when,
                                             subject=f.subject, rank=f.rank, step=f.step, message=f.message,
                                             now=now, destinations=self._destinations(rule))
            if alert_id is None:
                return  # another server opened it first
            command_id = None
            if rule.when == "hang" and rule.stacks:
                req = StacksRequest(run_id=run.run_id, reason=f"alert {rule.name}: {f.message}"[:MAX_REASON_CHARS])
                queued = self._commands.queue_in(conn, write, run, req)
                if isinstance(queued, CommandError):
                    logger.warning("alert %s: no stacks for run %s: %s", rule.name, run.run_id, queued.detail)
                else:
                    command_id = queued
                    alerts_sql.set_command(conn, alert_id, command_id)
            add_server_event(conn, write, AlertChanged(
                alert_id=alert_id, rule=rule.name, condition=rule.when, state="firing",
                subject=f.subject, message=f.message, rank=f.rank, command_id=command_id), _SEVERITY[rule.when])
            write.result = alert_id

        write = await self._store.submit_and_wait(EventWrite(run=run, rank=SERVER_RANK, prepare=prepare))
        if write.result is not None:
            logger.warning("alert %s fired on run %s: %s", rule.name, run.run_id, f.message)
            self._metrics.alerts_fired.labels(rule.name, rule.when).inc()
            self.wake.set()

    async def _resolve(self, alert_id: str, rule: Rule, why: str, now: float, seen_to_end: bool = True) -> None:
        """No longer firing: its condition was seen to end (a ``resolved`` notice goes out), or (not
        ``seen_to_end``) its run ended while it held: closed, saying so in the run's stream, and no notice
        (it was not resolved; the run's own end is a status rule's news)."""
        alert = await self._store.read(alerts_sql.get_alert, alert_id)
        run = None if alert is None else await self._store.find_run(alert.run_id)
        if alert is None or run is None:
            return
        destinations = self._destinations(rule) if seen_to_end else []
        message = f"resolved: {why}" if seen_to_end else f"closed: {why}; its condition was last seen holding"

        def prepare(conn: Conn, write: EventWrite) -> None:
            write.result = alerts_sql.resolve_alert(conn, alert_id, now, destinations)
            if write.result:
                add_server_event(conn, write, AlertChanged(
                    alert_id=alert_id, rule=rule.name, condition=rule.when, state="resolved",
                    subject=alert.subject, message=message, rank=alert.rank,
                    command_id=alert.command_id), Severity.INFO)

        write = await self._store.submit_and_wait(EventWrite(run=run, rank=SERVER_RANK, prepare=prepare))
        if write.result:
            logger.info("alert %s on run %s %s", rule.name, run.run_id, message)
            self._metrics.alerts_resolved.labels(rule.name, rule.when).inc()
            self.wake.set()

    # --- delivery -------------------------------------------------------------------------------

    async def deliver_due(self, now: float | None = None) -> int:
        """Send the notices due now that this server's destinations cover; returns how many were tried.

        What the database failed to take meanwhile is kept here and done first when it is back: the
        notices this server claimed (claimed for ``CLAIM_S``, no other server may send them yet) and the
        outcome of a send already made (stored, not sent twice)."""
        if not self._targets:
            return 0
        await self._record_owed()
        if not self._claimed:
            now = time.time() if now is None else now
            targets = list(self._targets)
            self._claimed = list(await self._store.call(lambda c: alerts_sql.claim_due(c, now, CLAIM_S, targets)))
        tried = len(self._claimed)
        while self._claimed:
            notice_id, alert_id, destination, state, attempts = self._claimed[0]
            record = await self._deliver(notice_id, alert_id, destination, state, attempts + 1)
            self._claimed.pop(0)
            if record is not None:
                self._owed.append(record)
                await self._record_owed()
        return tried

    async def _record_owed(self) -> None:
        while self._owed:
            await self._store.call(self._owed[0])
            self._owed.pop(0)

    async def _deliver(self, notice_id: str, alert_id: str, destination: str, state: str,
                       attempt: int) -> Callable[[Conn], None] | None:
        """One attempt; returns how to record its outcome (None: nothing to record)."""
        name = destination.rsplit("/", 1)[0]
        wait_until = self._limits[name].take()
        if wait_until:
            await self._store.call(lambda c: alerts_sql.postpone(c, notice_id, wait_until))
            self._metrics.alert_deliveries.labels(name, "rate_limited").inc()
            return None
        alert = await self._store.read(alerts_sql.get_alert, alert_id)
        if alert is None:  # its run was deleted meanwhile
            return None
        title, body, kind = _message(alert, state)
        ok, error = await asyncio.to_thread(send, self._targets[destination], title, body, kind)
        now = time.time()
        next_at = None if ok or attempt >= MAX_ATTEMPTS else now + backoff_s(attempt)
        result = "sent" if ok else ("retry" if next_at is not None else "failed")
        self._metrics.alert_deliveries.labels(name, result).inc()
        if not ok:
            logger.warning("alert %s to %s: attempt %d failed: %s", alert_id, destination, attempt, error)
        return lambda c: alerts_sql.record_attempt(c, notice_id, alert_id, destination, attempt, now, ok, error,
                                                   next_at)

    async def delivery_step(self, interval_s: float) -> None:
        """Deliver as notices come (woken by the sweep) and as retries fall due: one turn of the delivery
        task (``health.supervise`` runs it again and again)."""
        try:
            await asyncio.wait_for(self.wake.wait(), timeout=interval_s)
        except TimeoutError:
            pass
        self.wake.clear()
        while await self.deliver_due():
            pass

    async def sweep_step(self, interval_s: float) -> None:
        """One turn of the sweep task (``health.supervise`` runs it again and again)."""
        if self._engine.after_id is None:  # anomalies stored before the server started are history
            self._engine.after_id = await self._store.read(last_event_id)
        await asyncio.sleep(interval_s)
        await self.sweep()


def _message(alert: AlertInfo, state: str) -> tuple[str, str, str]:
    """Title, body and apprise notify type of one notice."""
    run = alert.run_name or alert.run_id
    if state == "firing":
        title = f"[nissa] {alert.rule}: {run}: {alert.subject}"
        body = alert.message
        kind = "failure" if alert.condition in ("hang", "status", "nan") else "warning"
    else:
        title = f"[nissa] resolved: {alert.rule}: {run}: {alert.subject}"
        body = f"resolved (was: {alert.message})"
        kind = "success"
    body += f"\nrun {alert.run_id}; alert {alert.alert_id}: GET /alerts/{alert.alert_id}"
    if alert.command_id:
        body += f"\nstacks of every rank: GET /commands/{alert.command_id}"
    return title, body, kind
