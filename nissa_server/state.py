"""The server's parts wired together, and the background work its lifespan owns."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from leyline import RunStatus
from nissa_server import queries, writes
from nissa_server.commands import CommandService
from nissa_server.fanout import FanOut
from nissa_server.metrics import Metrics
from nissa_server.runs import RunState
from nissa_server.settings import Settings
from nissa_server.store import EventWrite, Store

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class Nissa:
    """Everything a route needs, reachable as ``request.app.state.nissa``."""

    settings: Settings
    store: Store = field(init=False)
    fanout: FanOut = field(default_factory=FanOut)
    metrics: Metrics = field(default_factory=Metrics)
    commands: CommandService = field(init=False)
    _tasks: list[asyncio.Task] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.store = Store(self.settings.db_path, queue_batches=self.settings.writer_queue_batches)
        self.commands = CommandService(self.store, ttl_s=self.settings.command_ttl_s,
                                       max_open=self.settings.max_open_commands)
        self.store.on_publish = self._published

    def run(self, run_id: str) -> RunState | None:
        return self.store.registry.get(run_id)

    def _published(self, write: EventWrite) -> None:
        self.fanout.publish(write)
        if write.effects:
            self.commands.observe(write)

    async def start(self) -> None:
        await asyncio.to_thread(self.store.open)
        self.settings.artifacts_root.mkdir(parents=True, exist_ok=True)
        self.commands.load(*(await self.store.read(_command_state)))
        self.metrics.bind(
            watchers=lambda: len(self.fanout.watchers),
            watcher_queue=lambda: self.fanout.pending,
            writer_queue=lambda: self.store.queue_depth,
            commands=lambda: self.store.read_sync(queries.commands_by_status),
        )
        self.store.start()
        self._tasks.append(asyncio.create_task(self._maintain(), name="nissa-maintenance"))
        logger.info("store %s: %d runs", self.settings.db_path, len(self.store.registry))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        await self.store.close()

    async def _maintain(self) -> None:
        """Mark silent runs lost and expire commands nobody picked up."""
        while True:
            await asyncio.sleep(self.settings.maintenance_interval_s)
            await self.sweep()

    async def sweep(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        for run in self.store.registry:
            if run.is_lost(now, self.settings.lost_after_s):
                run.status = RunStatus.LOST
                logger.info("run %s lost: silent for %.0f s", run.run_id, now - run.last_seen)
                await self.store.call(lambda conn, r=run: writes.set_run_status(conn, r.run_key, r.status))
        await self.commands.expire_due(self.run, now)


def _command_state(conn):
    return queries.open_commands(conn), queries.idempotency_keys(conn)
