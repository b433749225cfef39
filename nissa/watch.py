"""``run.watch(model)``: per-layer gradient and weight statistics of any ``nn.Module`` during DEBUG windows.

At each step boundary of a DEBUG window (every ``every`` steps) the statistics of every watched module are
launched on the device and read back together: one host sync per collection, whatever the number of
modules and layers. Below DEBUG nothing is launched and nothing is read.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from leyline import DebugLayerStats, Payload, TelemetryLevel

from nissa.telemetry.debug_stats import PendingLayers, launch_layer_stats
from nissa.telemetry.readback import read_all


class ModelWatch:
    """The modules a run watches; ``collect`` is called at step boundaries."""

    def __init__(self, emit: Callable[[Payload], None], level: Callable[[], TelemetryLevel]) -> None:
        self._emit = emit
        self._level = level
        self._models: list[tuple[str, torch.nn.Module, int]] = []
        self.collections = 0

    def add(self, model: torch.nn.Module, name: str | None = None, every: int = 1) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"watch: expected a torch.nn.Module, got {type(model).__name__}")
        if every < 1:
            raise ValueError(f"watch: every must be >= 1, got {every}")
        self._models.append((name or type(model).__name__, model, every))

    def collect(self, step: int) -> list[DebugLayerStats]:
        """At DEBUG, launch every due module's statistics and read them in one transfer; emit them."""
        if not self._models or self._level() is not TelemetryLevel.DEBUG:
            return []
        pending: list[PendingLayers] = []
        for name, model, every in self._models:
            if step % every == 0:
                launched = launch_layer_stats(name, model.named_parameters())
                if launched is not None:
                    pending.append(launched)
        if not pending:
            return []
        read_all(pending)
        self.collections += 1
        payloads = [p for layers in pending for p in layers.payloads()]
        for payload in payloads:
            self._emit(payload)
        return payloads
