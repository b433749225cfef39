"""The live implementation of ``trainer.hooks.RunHooks``: the NissaHub plus run control.

``build_runtime`` wires a hub, a level controller and a command processor with the
``debug`` handler, and a ``profile`` handler that refuses until profiling is plugged in
(``runtime.commands.register(CommandAction.PROFILE, handler)``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from leyline import CommandAction, Payload, RunFinished, Severity, TelemetryLevel

from trainer.control import PROFILE_UNAVAILABLE, CommandProcessor, DebugHandler, LevelController, UnavailableHandler
from trainer.hub import DeliveryReport, HubConfig, NissaHub

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RuntimeConfig:
    """What a run's runtime needs: its hub and its starting telemetry level."""

    hub: HubConfig
    """Log, server and delivery settings of the run's hub."""
    level: TelemetryLevel = TelemetryLevel.NORMAL
    """Telemetry level outside DEBUG windows."""


class Runtime:
    """``RunHooks`` over a hub: stamps step and epoch, applies commands at step boundaries."""

    def __init__(self, hub: NissaHub, level: TelemetryLevel) -> None:
        self.hub = hub
        self._step = 0
        self._epoch = 0
        self.levels = LevelController(level, self.emit)
        self.commands = CommandProcessor(self.emit, hub.poll_commands)
        self.commands.register(CommandAction.DEBUG, DebugHandler(self.levels))
        self.commands.register(CommandAction.PROFILE, UnavailableHandler(PROFILE_UNAVAILABLE))

    @property
    def run_id(self) -> str:
        return self.hub.config.run_id

    @property
    def level(self) -> TelemetryLevel:
        return self.levels.level

    @property
    def step(self) -> int:
        return self._step

    @property
    def epoch(self) -> int:
        return self._epoch

    def emit(self, payload: Payload, *, env: int | None = None, severity: Severity | None = None) -> None:
        self.hub.emit(payload, step=self._step, epoch=self._epoch, env=env, severity=severity)

    def step_boundary(self, step: int, epoch: int) -> None:
        self._step = step
        self._epoch = epoch
        self.hub.mark_position(step, epoch)
        self.commands.step_boundary(step, epoch)

    def epoch_end(self, epoch: int) -> None:
        self._epoch = epoch
        self.commands.epoch_end(epoch)

    def update_begin(self, round_: int) -> None:
        self.commands.update_begin(round_)

    def update_end(self, round_: int) -> None:
        self.commands.update_end(round_)

    def escalate(self, *, epochs: int | None = None, through_update: bool = False, reason: str = "auto") -> str:
        """Open a DEBUG window from inside the run (auto-escalation), through the command path."""
        return self.commands.escalate_debug(epochs=epochs, through_update=through_update, reason=reason,
                                            run_id=self.run_id)

    def finish(self, summary: RunFinished, timeout: float = 10.0) -> DeliveryReport:
        """End the run: close open windows, emit ``run_finished`` last, close the hub within ``timeout``."""
        self.commands.run_end(summary.status)
        self.hub.flush(min(1.0, timeout / 4), delivered=False)  # drop reports and health land before run_finished
        self.emit(summary, severity=Severity.ERROR if summary.status == "failed" else None)
        return self.hub.close(timeout)


def build_runtime(config: RuntimeConfig) -> Runtime:
    """A started hub with run control wired to it."""
    return Runtime(NissaHub(config.hub).start(), config.level)
