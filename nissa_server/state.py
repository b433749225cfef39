"""The server's parts wired together, and the background work its lifespan owns."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from leyline import EventKind
from nissa_server.alerts.service import AlertService
from nissa_server.commands import CommandService
from nissa_server.fanout import FanOut
from nissa_server.health import Health, supervise
from nissa_server.metrics import Metrics
from nissa_server.pressure import Pressure
from nissa_server.reads import ReadGate
from nissa_server.runs import RunState
from nissa_server.settings import Settings
from nissa_server.store import Published, Store, alerts_sql, create_store, queries, ranks_sql, sql
from nissa_server.sweeps.service import SweepService

logger = logging.getLogger(__name__)
_COMMAND_STATUS = EventKind.COMMAND_STATUS.value


@dataclass(eq=False)
class Nissa:
    """Everything a route needs (``nissa_server.deps.NissaDep``); the app holds it as ``app.state.nissa``."""

    settings: Settings
    store: Store = field(init=False)
    fanout: FanOut = field(default_factory=FanOut)
    metrics: Metrics = field(default_factory=Metrics)
    commands: CommandService = field(init=False)
    alerts: AlertService = field(init=False)
    sweeps: SweepService = field(init=False)
    pressure: Pressure = field(init=False)
    health: Health = field(init=False)
    """Which parts work now (the database, each background task): ``/healthz``, ``nissa_degraded``."""
    reads: ReadGate = field(init=False)
    """Costly reads: a few at once, one run's at a time, a client's share bounded (``nissa_server.reads``)."""
    clock: Callable[[], float] = time.time
    """What the maintenance sweep takes as now (a test moves it on instead of waiting)."""
    server_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    """Prefix of this server's ingest sessions in the database (other servers' show as theirs)."""
    _tasks: list[asyncio.Task] = field(default_factory=list)
    _spawned: set[asyncio.Task] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.store = create_store(self.settings.database, queue_batches=self.settings.writer_queue_batches,
                                  commit_interval_s=self.settings.commit_interval_s,
                                  series_interval_s=self.settings.series_interval_s,
                                  max_retry_s=self.settings.retry_max_s)
        self.health = self.store.health
        self.reads = ReadGate(self.settings.read_slots, self.settings.reads_per_client)
        self.commands = CommandService(self.store, ttl_s=self.settings.command_ttl_s,
                                       max_open=self.settings.max_open_commands,
                                       stacks_answer_s=self.settings.stacks_answer_s)
        self.alerts = AlertService(self.settings.alert_rules, self.store, self.commands, self.metrics,
                                   silent_after_s=self.settings.rank_silent_after_s,
                                   lost_after_s=self.settings.lost_after_s)
        self.sweeps = SweepService(self.store, self.commands, lease_s=self.settings.sweep_lease_s)
        self.pressure = Pressure(lambda: self.store.queue_depth, self.settings.writer_queue_batches,
                                 self.metrics.loop_lag)
        self.store.on_publish = self._published
        self.store.on_stream_taken = self._stream_taken
        self.store.on_run_deleted = self.forget

    def run(self, run_id: str) -> RunState | None:
        """A run this server has met (see ``find_run`` for any run in the database)."""
        return self.store.registry.get(run_id)

    async def find_run(self, run_id: str) -> RunState | None:
        return await self.store.find_run(run_id)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` beside the request that started it; cancelled with the server."""
        task = asyncio.get_running_loop().create_task(coro)
        self._spawned.add(task)
        task.add_done_callback(self._spawned_done)

    def _spawned_done(self, task: asyncio.Task) -> None:
        self._spawned.discard(task)
        err = None if task.cancelled() else task.exception()
        if err is not None and not isinstance(err, self.store.errors):  # the store's are said by its health
            logger.error("%s failed", task.get_name(), exc_info=err)

    def _published(self, batches: Sequence[Published]) -> None:
        self.fanout.publish(batches)
        for batch in batches:  # a command's status moved: its trainer, if connected here, may be owed it
            if _COMMAND_STATUS not in batch.kinds:
                continue
            self.sweeps.wake()  # an exploit's checkpoint or restore may have finished: its next step is due
            run = self.store.registry.get(batch.run_id)
            if run is not None and run.connected:
                self.spawn(self.commands.dispatch(run))

    def _stream_taken(self, run_key: int, rank: int, session: str) -> None:
        run = self.store.registry.by_key(run_key)
        if run is not None:
            run.superseded_elsewhere(rank, session)

    def forget(self, run_key: int) -> None:
        """A deleted run: its connections here go, its cache entry too."""
        run = self.store.registry.forget(run_key)
        if run is not None:
            for conn in list(run.connections.values()):
                conn.supersede()

    def release(self, run: RunState, rank: int, session: str) -> None:
        """A live session ended: its stream is no longer held, the run was seen now."""
        self.spawn(self.store.call(lambda conn: sql.release_stream(conn, run.run_key, rank, session, time.time())))

    async def start(self) -> None:
        await asyncio.to_thread(self.store.open)
        self.settings.artifacts_root.mkdir(parents=True, exist_ok=True)
        self.metrics.bind(
            watchers=lambda: len(self.fanout.watchers),
            watcher_queue=lambda: self.fanout.pending,
            writer_queue=lambda: self.store.queue_depth,
            series_waiting=lambda: self.store.series_pass.waiting,
            by_status={"commands": lambda: self.store.read_sync(queries.commands_by_status),
                       "runs": lambda: self.store.read_sync(queries.runs_by_status),
                       "ranks": lambda: self.store.read_sync(queries.ranks_by_status),
                       "alerts": lambda: self.store.read_sync(alerts_sql.alerts_by_status)},
            errors=self.store.unavailable,
            degraded=self.health.levels,
        )
        self.store.on_committed = self.metrics.committed
        self.store.start()
        interval = self.settings.maintenance_interval_s
        self._supervise("maintenance", lambda: self._maintain(interval))
        if self.alerts.active:
            self._supervise("alert-sweep", lambda: self.alerts.sweep_step(interval))
            self._supervise("alert-delivery", lambda: self.alerts.delivery_step(interval))
        self._supervise("sweeps", lambda: self.sweeps.loop(self.settings.sweep_interval_s))
        self._supervise("loop-lag", self.pressure.watch_loop)
        logger.info("store %s (%s)", self.store.describe(), self.store.backend)

    def _supervise(self, part: str, step: Callable[[], Awaitable[object]]) -> None:
        """A background task of the server: ``step`` again and again, outliving any failure (``supervise``)."""
        task = supervise(self.health, part, step, max_retry_s=self.settings.retry_max_s)
        self._tasks.append(asyncio.create_task(task, name=f"nissa-{part}"))

    async def stop(self) -> None:
        for task in [*self._tasks, *self._spawned]:
            task.cancel()
        for task in [*self._tasks, *self._spawned]:
            try:
                await task
            except asyncio.CancelledError:
                pass
        await self.store.close()

    async def _maintain(self, interval_s: float) -> None:
        """Hold the streams connected here, mark silent runs lost, expire commands nobody picked up."""
        await asyncio.sleep(interval_s)
        await self.sweep()

    async def sweep(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        held = [(run.run_key, rank, conn.session) for run in self.store.registry
                for rank, conn in run.connections.items()]
        until = now + self.settings.hold_s
        if held:
            await self.store.call(lambda conn: sql.hold_streams(conn, held, until))
        silent_s = self.settings.rank_silent_after_s
        for run_id, status, detail in await self.store.call(lambda conn: ranks_sql.sweep_ranks(conn, now, silent_s)):
            logger.info("run %s %s%s", run_id, status, f": {detail}" if detail else "")
        for run_id in await self.store.call(lambda conn: sql.mark_lost(conn, now, self.settings.lost_after_s)):
            logger.info("run %s lost: silent for over %.0f s", run_id, self.settings.lost_after_s)
        await self.commands.expire_due(now)
