"""``run.watch(model)``: per-layer gradient and weight statistics of any ``nn.Module`` during DEBUG windows, and
(``histograms=``) distributions of its parameters or gradients at every level but OFF.

At each step boundary of a DEBUG window (every ``every`` steps) the statistics of every watched module are
launched on the device and read back together: one host sync per collection, whatever the number of
modules and layers. Below DEBUG nothing is launched and nothing is read. Histograms, where asked for, are
taken every ``every`` steps, each layer's on its device, and read back in one transfer per device
(``nissa.histogram``): one ``histogram`` event per collection, ``parameters/<name>`` and ``gradients/<name>``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from leyline import AnyPayload, DebugLayerStats, Histograms, TelemetryLevel
from leyline.payloads_histogram import DEFAULT_BINS, one_a_name
from nissa.histogram import Histogram, SegmentCache, distributions, launch_histograms
from nissa.integrations.names import metric_name
from nissa.telemetry.debug_stats import (
    MAX_DEBUG_DISTRIBUTIONS,
    PendingLayers,
    debug_histogram_payloads,
    launch_layer_stats,
    layer_histograms,
)
from nissa.telemetry.readback import read_all

HISTOGRAM_MODES = {"parameters": ("parameters",), "gradients": ("gradients",), "all": ("parameters", "gradients")}


class ModelWatch:
    """The modules a run watches; ``collect`` is called at step boundaries."""

    def __init__(self, emit: Callable[[AnyPayload], None], level: Callable[[], TelemetryLevel],
                 segments: SegmentCache | None = None) -> None:
        self._emit = emit
        self._level = level
        self.segments = SegmentCache() if segments is None else segments
        """The layouts of the watched models' collections, made on their devices once."""
        self._models: list[tuple[str, torch.nn.Module, int]] = []
        self._histograms: list[tuple[torch.nn.Module, int, tuple[str, ...], int]] = []
        self.collections = 0

    def add(self, model: torch.nn.Module, name: str | None = None, every: int = 1, histograms: str | None = None,
            bins: int = DEFAULT_BINS) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"watch: expected a torch.nn.Module, got {type(model).__name__}")
        if every < 1:
            raise ValueError(f"watch: every must be >= 1, got {every}")
        if histograms is not None and histograms not in HISTOGRAM_MODES:
            raise ValueError(f"watch: histograms must be one of {sorted(HISTOGRAM_MODES)} or None, got {histograms!r}")
        Histogram([], bins)  # names a bad ``bins`` now
        self._models.append((name or type(model).__name__, model, every))
        if histograms is not None:
            self._histograms.append((model, every, HISTOGRAM_MODES[histograms], bins))

    def collect_histograms(self, step: int) -> Histograms | None:
        """Every due model's distributions (not at OFF), read in one transfer per device; emitted."""
        if not self._histograms or self._level() is TelemetryLevel.OFF:
            return None
        named: list[tuple[str, Histogram]] = []
        for model, every, kinds, bins in self._histograms:
            if step % every:
                continue
            for param_name, param in model.named_parameters():
                if "parameters" in kinds:
                    named.append((metric_name(f"parameters/{param_name}"), Histogram(param, bins)))
                if "gradients" in kinds and param.grad is not None:
                    named.append((metric_name(f"gradients/{param_name}"), Histogram(param.grad, bins)))
        if not named:
            return None
        payload = Histograms(histograms=one_a_name(distributions(named[:1024], self.segments)))
        self._emit(payload)
        return payload

    def collect(self, step: int) -> list[DebugLayerStats]:
        """At DEBUG, launch every due module's statistics and its layers' gradient and weight distributions,
        read them all in one transfer; emit them (``debug_layer_stats``, and ``histogram`` events of
        ``debug/<model>/gradients/<layer>`` and ``debug/<model>/weights/<layer>``)."""
        if not self._models or self._level() is not TelemetryLevel.DEBUG:
            return []
        pending: list[PendingLayers] = []
        named: list[tuple[str, Histogram]] = []
        for name, model, every in self._models:
            if step % every == 0:
                launched = launch_layer_stats(name, model.named_parameters(), self.segments)
                if launched is not None:
                    pending.append(launched)
                    named += layer_histograms(name, model.named_parameters())
        if not pending:
            return []
        histograms = launch_histograms(named[:MAX_DEBUG_DISTRIBUTIONS], self.segments)
        read_all([*pending, *histograms])
        self.collections += 1
        payloads = [p for layers in pending for p in layers.payloads()]
        for payload in payloads:
            self._emit(payload)
        for event in debug_histogram_payloads(histograms):
            self._emit(event)
        return payloads
