"""The telemetry sites of the training loop, behind one object the loop calls.

Where the loop calls it (and what each level adds):

- after each env's backward on a training batch, ``if tel.gradients_due(batch):
  tel.collect_env(env, {"host": host, slot: seed, ...})``; then once per batch, after
  every env, ``tel.flush_gradients()``: gradient health per scope (host and each live
  seed, with EMA drift and the seed's gradient ratio), every ``gradient_stride``
  batches at NORMAL and every batch at DEBUG. DEBUG adds per-layer stats and distributions of
  each module, every ``debug_layer_stride`` batches of a window from its first one. Every env
  and scope of a collection, layer stats included, is read in ONE transfer, after waiting on
  the fence each launch recorded on its env's stream.
- inside the PPO update, after a backward: ``tel.policy_backward(policy)`` (DEBUG: the
  policy's per-layer stats, once per update);
- after the PPO update: ``tel.after_update(update, progress=..., lstm_state=(h, c))``:
  LSTM health (NORMAL), policy gradient health with drift (NORMAL), and every anomaly
  check on the update's numbers (MINIMAL and up), auto-escalating through the command
  path when one fires;
- ``with tel.phases.phase("train"): ...`` around each phase, and ``tel.epoch_end(round_,
  env_epochs, signals)`` at the end of each epoch: phase timing (MINIMAL and up), with how
  ``torch.compile`` fares (compiles, recompiles, graph breaks, fallbacks) when the run compiles,
  and the per-epoch anomaly checks on the epoch's gradient collections and signals (MINIMAL and
  up; the gradient checks see collections from NORMAL up).

At OFF nothing is measured; the loop runs the same code either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import msgspec
import torch
from torch import nn

from leyline import AnomalyDetected, CompileStats, GradientHealth, Severity, TelemetryLevel
from leyline.esper import PPOUpdate
from nissa.parts import (
    PendingHistograms,
    PendingLayers,
    PhaseTimer,
    SegmentCache,
    debug_histogram_payloads,
    launch_histograms,
    launch_layer_stats,
    layer_histograms,
    read_all,
)
from trainer.hooks import RunHooks
from trainer.simic.sites import EpochSignals
from trainer.telemetry.anomaly import AnomalyConfig, AnomalyDetector
from trainer.telemetry.ema import EMAConfig, GradientEMATracker
from trainer.telemetry.epoch_checks import Finding
from trainer.telemetry.flat import FlatRead, collect_flat
from trainer.telemetry.gradients import (
    GradientStats,
    GradientThresholds,
    PendingGradients,
    collect_gradients,
    env_scope,
    seed_gradient_ratio,
)
from trainer.telemetry.lstm import LSTMThresholds, lstm_health

if TYPE_CHECKING:
    from trainer.simic.batched import FlatGradients

logger = logging.getLogger(__name__)

HOST_SCOPE = "host"
POLICY_SCOPE = "policy"
_OFF, _MINIMAL, _NORMAL, _DEBUG = (TelemetryLevel.OFF, TelemetryLevel.MINIMAL, TelemetryLevel.NORMAL,
                                   TelemetryLevel.DEBUG)


@dataclass(frozen=True)
class TelemetryConfig:
    """Thresholds and cadence of the loop's collectors."""

    gradient_stride: int = 10
    """Gradient health every N training batches at NORMAL (every batch at DEBUG)."""
    debug_layer_stride: int = 10
    """At DEBUG, the per-layer statistics and distributions every N training batches, from a debug window's
    first batch on (1: every batch); the policy's are taken once per update whatever this is."""
    head_sizes: Mapping[str, int] = field(default_factory=dict)
    """Choices per policy action head, to normalise entropy (heads of size 1 are never judged)."""
    gradients: GradientThresholds = field(default_factory=GradientThresholds)
    """When a scope's gradients vanish or explode."""
    lstm: LSTMThresholds = field(default_factory=LSTMThresholds)
    """When the policy's LSTM state vanishes or explodes."""
    ema: EMAConfig = field(default_factory=EMAConfig)
    """Gradient-norm averages behind drift."""
    anomaly: AnomalyConfig = field(default_factory=AnomalyConfig)
    """Anomaly thresholds and auto-escalation."""
    compile_mode: str = "off"
    """The run's ``--compile-mode``; when not ``off``, each ``phase_timing`` carries ``CompileStats``."""

    def __post_init__(self) -> None:
        if self.gradient_stride < 1 or self.debug_layer_stride < 1:
            raise ValueError(f"strides must be >= 1, got gradient_stride={self.gradient_stride}, "
                             f"debug_layer_stride={self.debug_layer_stride}")
        if any(n < 1 for n in self.head_sizes.values()):
            raise ValueError("head sizes must be >= 1")


class CompileStatsSource(Protocol):
    def stats(self) -> CompileStats: ...


class SimicTelemetry:
    """The loop's collectors, gated by the run's effective level; see the module docstring."""

    def __init__(self, hooks: RunHooks, config: TelemetryConfig | None = None,
                 escalate: Callable[[str, int], str | None] | None = None) -> None:
        """``escalate(reason, epochs)`` opens a DEBUG window covering the next update (auto-escalation)."""
        self.hooks = hooks
        self.config = config or TelemetryConfig()
        self.phases = PhaseTimer()
        self.ema = GradientEMATracker(self.config.ema)
        self.detector = AnomalyDetector(self.config.anomaly, escalate)
        self._pending: list[tuple[int, PendingGradients]] = []
        self._layers: list[tuple[int, PendingLayers]] = []
        self._histograms: list[PendingHistograms] = []
        self.segments = SegmentCache()
        """The layouts of the per-layer collections (an env's scopes, the policy), made on the device once."""
        """Each DEBUG layer's gradient and weight distributions, read with the layer stats."""
        self._flat_reads: list[FlatRead] = []
        self._epoch_grads: list[tuple[int, GradientStats]] = []
        self._policy_layers_done = False
        self._layers_due = True
        """Whether this batch's collection at DEBUG takes the per-layer statistics and distributions."""
        self._layers_at: int | None = None
        """The batch of this debug window's last per-layer collection (None outside a window)."""
        self.compile_monitor: CompileStatsSource | None = None
        """What ``phase_timing`` reports of compile (``--compile-mode``) or of CUDA graph capture."""
        if self.config.compile_mode != "off":
            from trainer.telemetry.compile_stats import CompileMonitor  # torch._dynamo: only when compiling

            self.compile_monitor = CompileMonitor(self.config.compile_mode)

    @classmethod
    def for_run(cls, hooks: RunHooks, config: TelemetryConfig | None = None) -> SimicTelemetry:
        """Telemetry over ``hooks``; auto-escalation goes through ``hooks.escalate`` where the hooks have it."""
        escalate_fn = getattr(hooks, "escalate", None)
        escalate = None
        if callable(escalate_fn):
            def escalate(reason: str, epochs: int) -> str | None:
                return escalate_fn(epochs=epochs, through_update=True, reason=reason)
        return cls(hooks, config, escalate)

    def state_dict(self) -> dict[str, object]:
        """The collectors' histories a resumed run needs to report as the uninterrupted one would
        (timings are not part of it: they measure this process)."""
        return {"ema": self.ema.state_dict(), "detector": self.detector.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.ema.load_state_dict(state["ema"])
        self.detector.load_state_dict(state["detector"])

    # --- training batches ------------------------------------------------------------------------

    def gradients_due(self, batch: int) -> bool:
        """Whether to collect gradient health after this batch's backward (``batch`` counts from 0)."""
        level = self.hooks.level
        if level is not _DEBUG:
            self._layers_at = None
            return level.rank >= _NORMAL.rank and batch % self.config.gradient_stride == 0
        self._layers_due = self._layers_at is None or batch - self._layers_at >= self.config.debug_layer_stride
        if self._layers_due:
            self._layers_at = batch
        return True

    @torch.compiler.disable
    def collect_env(self, env: int, modules: Mapping[str, nn.Module]) -> None:
        """Launch the gradient norms (and at DEBUG the per-layer stats) of one env's scopes; no sync."""
        debug = self.hooks.level is _DEBUG and self._layers_due
        for scope, module in modules.items():
            self._pending.append((env, collect_gradients(scope, module.parameters(), self.config.gradients)))
            if debug:
                layers = launch_layer_stats(scope, module.named_parameters(), self.segments)
                if layers is not None:
                    self._layers.append((env, layers))
                    self._histograms += launch_histograms(layer_histograms(env_scope(env, scope),
                                                                           module.named_parameters()), self.segments)

    def collect_flat(self, grads: FlatGradients) -> None:
        """``collect_env`` for every env of the batched envs at once: the per-tensor norms of every env and
        scope in one reduction over the flat gradient buffer (at DEBUG the per-layer stats and distributions in
        a few more), read back as one tensor (``trainer.telemetry.flat``)."""
        collection = collect_flat(grads, self.config.gradients, self.hooks.level is _DEBUG and self._layers_due)
        self._pending += collection.gradients
        self._layers += collection.layers
        self._flat_reads.append(collection.read)

    def flush_gradients(self) -> None:
        """Read every collection of this batch (every env, every scope, layer stats included) in one
        transfer, then emit ``gradient_health`` per scope (and ``debug_layer_stats`` at DEBUG)."""
        if not self._pending and not self._layers:
            return
        pending, self._pending = self._pending, []
        layers, self._layers = self._layers, []
        histograms, self._histograms = self._histograms, []
        flat, self._flat_reads = self._flat_reads, []
        covered = set().union(*(f.covers for f in flat))
        read_all([*flat, *(p for _, p in pending if p.unread and id(p) not in covered),
                  *(lay for _, lay in layers if id(lay) not in covered), *histograms])
        stats = [p.resolve() for _, p in pending]
        hosts = {env: s for (env, _), s in zip(pending, stats, strict=True) if s.scope == HOST_SCOPE}
        for (env, _), s in zip(pending, stats, strict=True):
            self._epoch_grads.append((env, s))
            drift = self.ema.update(env_scope(env, s.scope), s.global_norm if s.finite else None)
            host = hosts.get(env)
            ratio = seed_gradient_ratio(s, host) if host is not None and s.scope != HOST_SCOPE else None
            severity = Severity.WARNING if (s.nonfinite or s.exploding or s.vanishing) else None
            self.hooks.emit(s.payload(ema_norm=drift.ema_norm, drift=drift.drift, ratio=ratio), env=env,
                            severity=severity)
        for env, lay in layers:
            for payload in lay.payloads():
                self.hooks.emit(payload, env=env)
        for distributions in debug_histogram_payloads(histograms, (d for f in flat for d in f.distributions)):
            self.hooks.emit(distributions)

    def forget_scope(self, env: int, scope: str) -> None:
        """A seed left its slot: the next one there starts a fresh gradient average and history."""
        self.ema.forget(env_scope(env, scope))
        self.detector.forget_scope(env, scope)

    # --- the PPO update --------------------------------------------------------------------------

    def update_begin(self) -> None:
        self._policy_layers_done = False

    def policy_backward(self, policy: nn.Module) -> None:
        """After a backward of the PPO update: at DEBUG, the policy's per-layer stats (first one per update)."""
        level = self.hooks.level
        if level is not _DEBUG or self._policy_layers_done:
            return
        self._policy_layers_done = True
        layers = launch_layer_stats(POLICY_SCOPE, policy.named_parameters(), self.segments)
        if layers is None:
            return
        histograms = launch_histograms(layer_histograms(POLICY_SCOPE, policy.named_parameters()), self.segments)
        read_all([layers, *histograms])  # the stats and the distributions of every layer: one transfer
        for payload in [*layers.payloads(), *debug_histogram_payloads(histograms)]:
            self.hooks.emit(payload)

    def after_update(self, update: PPOUpdate, *, progress: float,
                     lstm_state: tuple[torch.Tensor, torch.Tensor] | None = None) -> list[AnomalyDetected]:
        """Health and anomaly checks of one PPO update; returns the anomalies it emitted."""
        level = self.hooks.level
        self._policy_layers_done = False
        if level is _OFF:
            return []
        lstm = lstm_health(*lstm_state, self.config.lstm) if lstm_state is not None else None
        drift = self.ema.update(POLICY_SCOPE, update.grad_norm)
        if level.rank >= _NORMAL.rank:
            if lstm is not None:
                self.hooks.emit(lstm)
            self.hooks.emit(GradientHealth(scope=POLICY_SCOPE, global_norm=_finite(update.grad_norm),
                                           ema_norm=drift.ema_norm, drift=drift.drift,
                                           nonfinite=0 if _finite(update.grad_norm) is not None else 1,
                                           exploding=update.grad_norm > self.config.gradients.exploding))
        found = self.detector.check_all(update, head_sizes=self.config.head_sizes, drift=drift, lstm=lstm)
        self._emit_anomalies([(None, f) for f in found])
        return found

    def _emit_anomalies(self, found: list[Finding]) -> None:
        for env, anomaly in found:
            self.hooks.emit(anomaly, env=env, severity=Severity.ERROR if anomaly.anomaly == "nan_inf" else None)

    # --- epochs ----------------------------------------------------------------------------------

    def epoch_end(self, round_: int, env_epochs: int, signals: EpochSignals | None = None) -> list[Finding]:
        """Phase timing of the epoch just ended (and of an update that ran since the last report),
        then the per-epoch anomaly checks; returns the anomalies it emitted, with their env."""
        report = self.phases.report(round_, env_epochs)
        grads, self._epoch_grads = self._epoch_grads, []
        if self.hooks.level is _OFF:
            return []
        if report is not None:
            if self.compile_monitor is not None:
                report = msgspec.structs.replace(report, compile=self.compile_monitor.stats())
            self.hooks.emit(report)
        found = self.detector.check_epoch(signals, grads)
        self._emit_anomalies(found)
        return found


def _finite(x: float) -> float | None:
    return x if x == x and abs(x) != float("inf") else None
