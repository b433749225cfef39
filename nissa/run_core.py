"""``RunCore``: what a ``Run`` is made of and where it lives, and what a loop that counts its own steps and epochs
(Esper's rounds of environments) uses of it instead of ``run.step()``: ``hooks``, ``handle``, ``delivery``,
``control_state``, ``abandon``. ``Run`` (``nissa.run``) adds what every loop uses.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

from leyline import TelemetryLevel
from nissa.control.commands import CommandHandler, R
from nissa.hub import DeliveryReport
from nissa.runtime import LoopHooks, Runtime
from nissa.telemetry.install import open_start_windows
from ranks import Ranks


def _nothing() -> None:
    pass


class RunCore:
    """A run's runtime (its hub, its command processor: ``nissa.parts``) behind the methods a loop needs of it."""

    def __init__(self, runtime: Runtime, *, close_ranks: bool) -> None:
        self.runtime = runtime
        """What the run is made of; the methods here and ``Run``'s are what a loop needs of it."""
        self._close_ranks = close_ranks
        self._report: DeliveryReport | None = None
        self._stop_watchdog: Callable[[], None] = _nothing
        self._stop_system: Callable[[], None] = _nothing

    # --- what the run is ----------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """The run's id on the server and under ``log_dir`` (``<run_name>-<utc time>-<random hex>``)."""
        return self.runtime.run_id

    @property
    def level(self) -> TelemetryLevel:
        """The telemetry level now (DEBUG inside a debug window)."""
        return self.runtime.level

    @property
    def log_path(self) -> pathlib.Path:
        """The run's local log, ``<log_dir>/<run_id>/events.jsonl`` (``events.rankN.jsonl`` on rank N): every
        event is written there first, then streamed."""
        return self.runtime.hub.config.log_path

    @property
    def run_dir(self) -> pathlib.Path:
        """``<log_dir>/<run_id>``: the run's log, stream secret, profile traces."""
        return self.runtime.hub.config.run_dir

    @property
    def finished(self) -> bool:
        """``finish`` was called: the run takes no more steps, values or commands."""
        return self._report is not None

    # --- for a loop that counts its own steps (Esper's rounds of envs) ------------------------------

    @property
    def hooks(self) -> LoopHooks:
        """Where a loop that counts its own steps and epochs reports them, instead of calling ``run.step()``:
        ``hooks.step_boundary(step, epoch)``, ``hooks.epoch_end(epoch)``, ``hooks.emit(payload)``."""
        return self.runtime

    @property
    def ranks(self) -> Ranks:
        """The run's ranks (alone: rank 0 of 1)."""
        return self.runtime.ranks

    def handle(self, kind: type[R], handler: CommandHandler[R]) -> None:
        """Make ``handler`` the one that applies requests of type ``kind`` (before the run's first step): a loop's
        own ``checkpoint`` and ``stop`` (``CheckpointRequest``, ``StopRequest``), in place of ``on_checkpoint``
        and ``on_stop``."""
        self._check_open("run.handle")
        self.runtime.commands.register(kind, handler)

    def control_state(self) -> dict[str, object]:
        """The telemetry level and the open debug windows, for a checkpoint (``resume`` takes them back)."""
        return self.runtime.control_state()

    def delivery(self) -> DeliveryReport:
        """Where the run's events are now: logged, stored by the server, still in memory (``finish`` returns the
        last such report)."""
        return self._report or self.runtime.hub.report()

    def first_contact(self, timeout: float = 5.0) -> str | None:
        """Wait for the stream's first connection to end: why the server refused it (a wrong token: its close code
        and reason), or None (taken, or the server away or silent past ``timeout``: the run goes on, the stream
        retries)."""
        return self.runtime.hub.first_refusal(timeout) if self.runtime.hub.config.server else None

    def open_start_windows(self, *, profile_batches: int | None = None, profile_update: bool = False) -> None:
        """Profile windows from the run's start, after ``start``: over the first ``profile_batches`` steps, and
        (``profile_update``; both: after it) over the first update."""
        open_start_windows(self.runtime, profile_batches=profile_batches, profile_update=profile_update)

    def abandon(self) -> None:
        """Stop the run at once without ending it (no ``run_finished``; a run refused at its start): its stream
        closes, what it logged stays in its log, the ranks ``nissa.init`` joined are left. Nothing after
        ``finish`` or ``end``."""
        if self._report is None:
            self._stop_watchdog()
            self._stop_system()
            self._report = self.runtime.hub.close(0.0)
            if self._close_ranks:
                self.runtime.ranks.close()

    def _check_open(self, what: str) -> None:
        if self._report is not None:
            raise RuntimeError(f"{what}: run {self.run_id} has finished (nissa.init starts another)")
