"""The console against a real server: a console polling fast, waiting on what it shows, and the set-up most
key tests share (a server, a scripted trainer with a live run, the console open on that run's view)."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import AsyncIterator
from typing import Any

from textual.pilot import Pilot

from tests.support.clock import ManualClock
from tests.support.server import running_server
from tests.support.waiting import async_wait_for
from tests.tui.producer import ScriptedTrainer, scripted_trainer
from tests.tui.scenario import scripted_run
from tui.app import EsperWatch
from tui.client import ClientConfig
from tui.config import WatchConfig
from tui.screens.run_view import RunViewScreen

SIZE = (120, 40)


def console(url: str, clock: ManualClock | None = None, **kwargs: object) -> EsperWatch:
    """A console polling fast; on ``clock`` when given (a run's silence then lasts only as long as the test
    advances it, however slow the machine)."""
    token = kwargs.pop("token", None)
    fast = dict(refresh_hz=20.0, command_poll_s=0.2, runs_poll_s=0.2)
    fast.update(kwargs)  # type: ignore[arg-type]
    client = ClientConfig(url, token=token, backoff_initial_s=0.05, backoff_max_s=0.5)  # type: ignore[arg-type]
    config = WatchConfig(client=client, **fast)  # type: ignore[arg-type]
    return EsperWatch(config) if clock is None else EsperWatch(config, clock=clock)


async def until(pilot, predicate, message: str, timeout: float = 30.0):
    async def check():
        await pilot.pause()
        return predicate()
    return await async_wait_for(check, timeout=timeout, message=message)


@contextlib.asynccontextmanager
async def live_run(tmp_path: pathlib.Path, run_id: str, epochs: int = 1,
                   **server: Any) -> AsyncIterator[tuple[str, ScriptedTrainer]]:  # running_server's own
    """A server (``server``: its settings) and a scripted trainer connected to it, ``epochs`` of a run sent and
    the run still live: ``(url, trainer)``; the trainer answers the commands it is sent."""
    with running_server(tmp_path, **server) as url:
        async with scripted_trainer(url, run_id) as trainer:
            await trainer.send(scripted_run(run_id, epochs=epochs, finish=False))
            yield url, trainer


@contextlib.asynccontextmanager
async def run_view(url: str, run_id: str,
                   size: tuple[int, int] = SIZE) -> AsyncIterator[tuple[EsperWatch, Pilot, RunViewScreen]]:
    """The console opened on ``run_id`` in a ``size`` terminal, once its run view shows: ``(app, pilot, view)``."""
    app = console(url, run_id=run_id)
    async with app.run_test(size=size) as pilot:
        view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
        yield app, pilot, view
