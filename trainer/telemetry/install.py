"""Plugging Esper's telemetry into a live run: ``telemetry_for_training`` builds the loop's collectors for a
training config (stride, policy head sizes), escalating through the run's command path. The windows that any
loop has (profiling, the ranks' straggler check) are the run's own (``nissa.init`` installs them).
"""

from __future__ import annotations

from leyline.esper import HEAD_NAMES
from trainer.hooks import RunHooks
from trainer.simic.config import TrainConfig
from trainer.tamiyo.actions import head_sizes
from trainer.telemetry.sites import SimicTelemetry, TelemetryConfig

__all__ = ["telemetry_for_training"]


def telemetry_for_training(hooks: RunHooks, config: TrainConfig) -> SimicTelemetry:
    """The loop's collectors for ``config``: its gradient stride and its policy's head sizes."""
    sizes = dict(zip(HEAD_NAMES, head_sizes(len(config.slots)), strict=True))
    return SimicTelemetry.for_run(hooks, TelemetryConfig(gradient_stride=config.gradient_telemetry_stride,
                                                         head_sizes=sizes, compile_mode=config.compile_mode))
