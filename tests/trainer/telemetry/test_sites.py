"""The loop-facing telemetry object: what each level measures, one transfer per batch, anomalies emitted."""

from __future__ import annotations

import math

import msgspec
import pytest
import torch

from leyline import AnomalyDetected, DebugLayerStats, GradientHealth, Histograms, PhaseTiming, Severity, TelemetryLevel
from leyline.esper import LSTMHealth, PPOUpdate
from nissa.telemetry.syncs import HostSyncCounter
from trainer.telemetry.sites import SimicTelemetry, TelemetryConfig


class Recorder:
    """``RunHooks`` that keep what is emitted, at a level the test sets."""

    def __init__(self, level: TelemetryLevel) -> None:
        self.level = level
        self.events: list[tuple[object, int | None, Severity | None]] = []

    def emit(self, payload, *, env=None, severity=None) -> None:
        self.events.append((payload, env, severity))

    def of(self, kind: type) -> list:
        return [p for p, _, _ in self.events if isinstance(p, kind)]


def _env_modules(seed: int) -> dict[str, torch.nn.Module]:
    torch.manual_seed(seed)
    host = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    seed_mod = torch.nn.Linear(16, 16)
    x = host[1](host[0](torch.randn(5, 8)))
    host[2](x + seed_mod(x)).sum().backward()
    return {"host": host, "r0c0": seed_mod}


UPDATE = PPOUpdate(round=1, policy_loss=-0.01, value_loss=0.4, entropy={"op": 1.5}, approx_kl=0.01,
                   clip_fraction=0.1, explained_variance=0.5, ratio_min=0.8, ratio_max=1.2, grad_norm=0.9,
                   update_epochs=4)


def test_gradient_health_per_scope_with_ratio_and_one_transfer():
    hooks = Recorder(TelemetryLevel.NORMAL)
    tel = SimicTelemetry(hooks, TelemetryConfig(gradient_stride=5))
    assert tel.gradients_due(0) and not tel.gradients_due(3) and tel.gradients_due(10)
    envs = [_env_modules(0), _env_modules(1)]
    for env, modules in enumerate(envs):
        tel.collect_env(env, modules)
    with HostSyncCounter(torch.device("cpu")) as syncs:
        tel.flush_gradients()
    assert syncs.count == 1, f"every env and scope of a batch in one transfer: {syncs.by_call}"
    health = [(p, env) for p, env, _ in hooks.events if isinstance(p, GradientHealth)]
    assert [(p.scope, env) for p, env in health] == [("host", 0), ("r0c0", 0), ("host", 1), ("r0c0", 1)]
    host0, seed0 = health[0][0], health[1][0]
    expected = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in envs[0]["host"].parameters()))
    assert host0.global_norm == pytest.approx(expected, rel=1e-6) and host0.ratio is None
    assert seed0.ratio is not None and seed0.ratio > 0
    assert not hooks.of(DebugLayerStats), "per-layer stats only at DEBUG"


def test_debug_collects_every_batch_and_adds_layer_stats():
    hooks = Recorder(TelemetryLevel.DEBUG)
    tel = SimicTelemetry(hooks, TelemetryConfig(gradient_stride=10))
    assert all(tel.gradients_due(b) for b in range(1, 10))
    tel.gradients_due(11)  # the window began at batch 1: its per-layer figures again 10 batches on
    tel.collect_env(0, _env_modules(0))
    tel.flush_gradients()
    layers = hooks.of(DebugLayerStats)
    assert [p.model for p in layers] == ["host", "r0c0"] and len(layers[0].layers) == 4


def test_debug_takes_layer_stats_and_distributions_from_a_windows_first_batch_every_stride():
    """Gradient health every batch of a debug window; the per-layer figures (most of what DEBUG costs) at its
    first batch and every ``debug_layer_stride`` batches after, whatever the window's start."""
    hooks = Recorder(TelemetryLevel.NORMAL)
    tel = SimicTelemetry(hooks, TelemetryConfig(gradient_stride=10, debug_layer_stride=3))
    modules = _env_modules(0)
    layered = []
    for batch in range(7, 20):
        hooks.level = TelemetryLevel.DEBUG if batch < 15 or batch >= 17 else TelemetryLevel.NORMAL
        if tel.gradients_due(batch):
            before = len(hooks.of(DebugLayerStats))
            tel.collect_env(0, modules)
            tel.flush_gradients()
            if len(hooks.of(DebugLayerStats)) > before:
                layered.append(batch)
    assert layered == [7, 10, 13, 17]  # a second window (from 17) starts its own count
    assert len(hooks.of(Histograms)) == 4
    health = [p for p in hooks.of(GradientHealth) if p.scope == "host"]
    assert len(health) == 8 + 3  # every batch of both windows, none in between (NORMAL's stride: not due)


def test_debug_reads_every_env_and_scope_of_a_collection_in_one_transfer():
    hooks = Recorder(TelemetryLevel.DEBUG)
    tel = SimicTelemetry(hooks, TelemetryConfig(gradient_stride=10))
    envs = [_env_modules(env) for env in range(3)]
    with HostSyncCounter(torch.device("cpu")) as syncs:
        for env, modules in enumerate(envs):
            tel.collect_env(env, modules)
        assert syncs.count == 0, f"nothing is read while the envs are being collected: {syncs.by_call}"
        tel.flush_gradients()
    assert syncs.count == 1, f"norms and layer stats of every env and scope in one transfer: {syncs.by_call}"
    layers = [(env, p.model) for p, env, _ in hooks.events if isinstance(p, DebugLayerStats)]
    assert layers == [(e, m) for e in range(3) for m in ("host", "r0c0")]
    # each layer's gradient and weight distributions, read in that same transfer: a layer is one chart
    (hist,) = hooks.of(Histograms)
    by_name = {d.name: d for d in hist.histograms}
    assert len(by_name) == 3 * (4 + 2) * 2 and "debug/env2/r0c0/gradients/weight" in by_name
    w = by_name["debug/env1/host/weights/0.weight"]
    assert w.count == 8 * 16 and w.max == pytest.approx(envs[1]["host"][0].weight.max().item())
    g = by_name["debug/env0/host/gradients/2.bias"]
    assert g.count == 4 and g.min == pytest.approx(envs[0]["host"][2].bias.grad.min().item())


def test_flush_waits_on_every_fence_before_reading():
    # On CPU nothing can race; this checks the wiring only: each launch's fence is waited on.
    hooks = Recorder(TelemetryLevel.DEBUG)
    tel = SimicTelemetry(hooks, TelemetryConfig())
    for env in range(2):
        tel.collect_env(env, _env_modules(env))
    fences = [p.fence for _, p in tel._pending] + [lay.fence for _, lay in tel._layers]
    assert len(fences) == 8 and not any(f.waited for f in fences)
    tel.flush_gradients()
    assert all(f.waited for f in fences)


@pytest.mark.parametrize("level", [TelemetryLevel.OFF, TelemetryLevel.MINIMAL])
def test_no_gradient_collection_below_normal(level):
    tel = SimicTelemetry(Recorder(level))
    assert not any(tel.gradients_due(b) for b in range(20))


def test_after_update_runs_every_check_and_reports_health():
    hooks = Recorder(TelemetryLevel.NORMAL)
    tel = SimicTelemetry(hooks, TelemetryConfig(head_sizes={"op": 6}))
    lstm = torch.nn.LSTM(4, 8)
    _, (h, c) = lstm(torch.randn(3, 2, 4))
    assert tel.after_update(UPDATE, progress=0.5, lstm_state=(h.detach(), c.detach())) == []
    assert len(hooks.of(LSTMHealth)) == 1
    (policy,) = hooks.of(GradientHealth)
    assert policy.scope == "policy" and policy.global_norm == pytest.approx(0.9)
    bad = msgspec.structs.replace(UPDATE, approx_kl=0.5, value_loss=math.nan)
    found = tel.after_update(bad, progress=0.5)
    assert [f.anomaly for f in found] == ["nan_inf", "kl_spike"]
    emitted = [(p.anomaly, sev) for p, _, sev in hooks.events if isinstance(p, AnomalyDetected)]
    assert emitted == [("nan_inf", Severity.ERROR), ("kl_spike", None)]


def test_gradient_drift_reaches_check_all_from_the_update_grad_norm():
    hooks = Recorder(TelemetryLevel.MINIMAL)
    tel = SimicTelemetry(hooks)
    for _ in range(10):
        assert tel.after_update(UPDATE, progress=0.5) == []
    found = tel.after_update(msgspec.structs.replace(UPDATE, grad_norm=50.0), progress=0.5)
    assert [f.anomaly for f in found] == ["gradient_drift"]
    assert not hooks.of(LSTMHealth) and not hooks.of(GradientHealth), "MINIMAL: anomalies, no health events"


def test_auto_escalation_callback_is_used():
    opened: list[tuple[str, int]] = []
    tel = SimicTelemetry(Recorder(TelemetryLevel.NORMAL),
                         escalate=lambda reason, epochs: opened.append((reason, epochs)) or "auto-1")
    (finding,) = tel.after_update(msgspec.structs.replace(UPDATE, ratio_max=9.0), progress=0.5)
    assert finding.auto_escalated and opened == [("auto: ratio_explosion", 2)]


def test_policy_layer_stats_once_per_update_at_debug():
    hooks = Recorder(TelemetryLevel.DEBUG)
    tel = SimicTelemetry(hooks)
    policy = torch.nn.Linear(3, 2)
    policy(torch.randn(4, 3)).sum().backward()
    tel.update_begin()
    for _ in range(3):
        tel.policy_backward(policy)
    tel.after_update(UPDATE, progress=0.5)
    with HostSyncCounter(torch.device("cpu")) as syncs:
        tel.policy_backward(policy)
    assert syncs.count == 1, f"the policy's layer stats and distributions in one transfer: {syncs.by_call}"
    assert [p.model for p in hooks.of(DebugLayerStats)] == ["policy", "policy"]
    assert [sorted(d.name for d in h.histograms) for h in hooks.of(Histograms)] == [
        ["debug/policy/gradients/bias", "debug/policy/gradients/weight", "debug/policy/weights/bias",
         "debug/policy/weights/weight"]] * 2


def test_phase_timing_each_epoch_and_nothing_at_off():
    hooks = Recorder(TelemetryLevel.MINIMAL)
    tel = SimicTelemetry(hooks)
    with tel.phases.phase("train"):
        pass
    tel.epoch_end(round_=1, env_epochs=2)
    (timing,) = hooks.of(PhaseTiming)
    assert [p.phase for p in timing.phases] == ["train"] and timing.env_epochs_per_s > 0
    hooks.level = TelemetryLevel.OFF
    with tel.phases.phase("train"):
        pass
    tel.epoch_end(round_=1, env_epochs=2)
    assert len(hooks.of(PhaseTiming)) == 1
    assert tel.after_update(msgspec.structs.replace(UPDATE, approx_kl=9.0), progress=0.5) == []
