"""The real loop with the real runtime: every detector is fed by the loop, debug windows cover the update.

Each run is a tiny PPO run on CPU whose events are read back from the run log. Detector
thresholds are set so that each check fires on the loop's real numbers: an anomaly event
of a kind can only appear if the loop called that check with real inputs.
"""

from __future__ import annotations

import pathlib
import time

import pytest

from leyline import (
    Command,
    CommandStatus,
    CommandStatusChanged,
    DebugLayerStats,
    DebugRequest,
    Event,
    EventKind,
    GradientHealth,
    Histograms,
    PhaseTiming,
    RunFinished,
    TelemetryLevel,
    TelemetryLevelChanged,
    decode_event,
)
from leyline.esper import EsperKind, LSTMHealth
from nissa.hub import HubConfig
from nissa.runtime import Runtime, RuntimeConfig, build_runtime
from trainer.build import build_trainer, run_training
from trainer.hooks import NullHooks
from trainer.simic.config import TrainConfig
from trainer.telemetry.anomaly import AnomalyConfig
from trainer.telemetry.install import telemetry_for_training
from trainer.telemetry.lstm import LSTMThresholds
from trainer.telemetry.sites import SimicTelemetry, TelemetryConfig

TINY = dict(device="cpu", policy="ppo", n_envs=2, episode_length=3, train_size=128, val_size=64, batch_size=64,
            log_every=0, lstm_hidden=8, base_channels=4, gradient_telemetry_stride=2, seed=1)
pytestmark = pytest.mark.usefixtures("one_thread")


class CommandAt:
    """The runtime's hooks, submitting commands at the first step boundary of given epochs."""

    def __init__(self, runtime: Runtime, plan: dict[int, Command]) -> None:
        self.runtime = runtime
        self.plan = dict(plan)

    def __getattr__(self, name: str):
        return getattr(self.runtime, name)

    @property
    def level(self) -> TelemetryLevel:
        return self.runtime.level

    def step_boundary(self, step: int, epoch: int) -> None:
        command = self.plan.pop(epoch, None)
        if command is not None:
            self.runtime.commands.submit(command)
        self.runtime.step_boundary(step, epoch)


def _run(tmp_path: pathlib.Path, name: str, config: TrainConfig, *, level=TelemetryLevel.NORMAL,
         telemetry=None, plan: dict[int, Command] | None = None) -> list[Event]:
    runtime = build_runtime(RuntimeConfig(hub=HubConfig(run_id=name, log_dir=tmp_path), level=level))
    hooks = CommandAt(runtime, plan or {})
    sites = telemetry(hooks) if telemetry is not None else telemetry_for_training(hooks, config)
    start = time.perf_counter()
    summary = run_training(config, hooks, sites=sites)
    assert runtime.finish(RunFinished(status="completed", duration_s=time.perf_counter() - start)).complete
    assert summary.epochs == config.rounds * config.episode_length
    return [decode_event(line) for line in (tmp_path / name / "events.jsonl").read_bytes().splitlines()]


def _payloads(events: list[Event], kind: type) -> list:
    return [e.payload for e in events if isinstance(e.payload, kind)]


def _anomalies(events: list[Event]) -> set[str]:
    return {e.payload.anomaly for e in events if e.kind is EventKind.ANOMALY_DETECTED}


def _sensitive(anomaly: AnomalyConfig, lstm: LSTMThresholds, config: TrainConfig):
    def build(hooks) -> SimicTelemetry:
        base = telemetry_for_training(hooks, config).config
        return SimicTelemetry.for_run(hooks, TelemetryConfig(gradient_stride=base.gradient_stride,
                                                             head_sizes=base.head_sizes, anomaly=anomaly, lstm=lstm))
    return build


def test_every_detector_is_fed_by_the_loop(tmp_path):
    config = TrainConfig(rounds=3, **TINY)
    # Thresholds every real update crosses: only a check the loop really calls can fire.
    loud = AnomalyConfig(ratio_explosion=1.0 + 1e-9, kl_spike=1e-12, entropy_collapse=1.01,
                         value_spread=0.999, drift_max=1e-9, drift_min_updates=1, auto_escalate=False)
    events = _run(tmp_path, "loud", config, telemetry=_sensitive(loud, LSTMThresholds(max_norm=1e-9, min_norm=0.0),
                                                                 config))
    fired = _anomalies(events)
    assert {"ratio_explosion", "kl_spike", "entropy_collapse", "value_collapse", "gradient_drift",
            "lstm_explosion"} <= fired, fired
    collapse = AnomalyConfig(ratio_collapse=1.0 - 1e-9, ratio_explosion=1e9, auto_escalate=False)
    events = _run(tmp_path, "quiet", config, telemetry=_sensitive(collapse, LSTMThresholds(max_norm=1e9, min_norm=1e8),
                                                                  config))
    assert {"ratio_collapse", "lstm_vanishing"} <= _anomalies(events)
    ppo = [e for e in events if e.kind is EsperKind.PPO_UPDATE]
    lstm = _payloads(events, LSTMHealth)
    assert len(ppo) == len(lstm) == config.rounds and all(h.h_norm > 0 for h in lstm)


def test_normal_run_health_events(tmp_path):
    config = TrainConfig(rounds=2, **TINY)
    events = _run(tmp_path, "normal", config)
    timing = [e for e in events if isinstance(e.payload, PhaseTiming)]
    assert len(timing) == config.rounds * config.episode_length  # one per epoch
    phases = {p.phase for e in timing for p in e.payload.phases}
    assert {"train", "validation", "rollout", "action", "ppo_update"} <= phases
    health = _payloads(events, GradientHealth)
    batches = -(-config.train_size // config.batch_size) * config.episode_length * config.rounds
    host = [h for h in health if h.scope == "host"]
    assert len(host) == config.n_envs * -(-batches // config.gradient_telemetry_stride)
    assert all(h.global_norm and h.global_norm > 0 for h in host)
    assert [h.scope for h in health if h.scope == "policy"] == ["policy"] * config.rounds
    assert not _payloads(events, DebugLayerStats)


def _debug(cid: str, *, epochs: int | None = None, through_update: bool = False) -> Command:
    return Command(command_id=cid, request=DebugRequest(run_id="r", epochs=epochs, through_update=through_update))


def _window(events: list[Event], cid: str) -> tuple[Event, Event]:
    changes = [e for e in events if isinstance(e.payload, TelemetryLevelChanged)]
    opened = next(e for e in changes if e.payload.command_id == cid and e.payload.level is TelemetryLevel.DEBUG)
    closed = next(e for e in changes if e.seq > opened.seq and e.payload.level is TelemetryLevel.NORMAL)
    return opened, closed


def _completed(events: list[Event], cid: str) -> CommandStatusChanged:
    return next(p for p in _payloads(events, CommandStatusChanged)
                if p.command_id == cid and p.status is CommandStatus.COMPLETED)


@pytest.mark.parametrize("through_update", [False, True])
def test_debug_window_opens_and_closes_at_the_requested_epochs(tmp_path, through_update):
    config = TrainConfig(rounds=2, **TINY)  # epochs 1-3 then the first update, epochs 4-6 then the second
    events = _run(tmp_path, f"debug-{through_update}", config,
                  plan={2: _debug("w", epochs=1, through_update=through_update)})
    opened, closed = _window(events, "w")
    assert opened.epoch == 2
    inside = [e for e in events if opened.seq < e.seq < closed.seq]
    policy_layers = [e for e in inside if isinstance(e.payload, DebugLayerStats) and e.payload.model == "policy"]
    host_layers = [e for e in inside if isinstance(e.payload, DebugLayerStats) and e.payload.model == "host"]
    result = _completed(events, "w").result
    assert host_layers and all(e.epoch == 2 or through_update for e in host_layers)
    if through_update:
        # Held past epoch 2 until the end of the PPO update that follows epoch 3: the policy was seen.
        assert policy_layers and any(isinstance(e.payload, LSTMHealth) for e in inside)
        assert result["covered_update"] is True and result["closed_epoch"] == 3
    else:
        assert closed.epoch == 2 and not policy_layers  # ended with epoch 2, before the update
        assert result["covered_update"] is False and result["closed_epoch"] == 2
    # DEBUG: gradient health every batch while the window is open.
    steps = sorted({e.step for e in inside if isinstance(e.payload, GradientHealth) and e.payload.scope == "host"})
    assert steps == list(range(steps[0], steps[0] + len(steps)))


def test_auto_escalation_from_the_loop_opens_a_window_through_the_command_path(tmp_path):
    config = TrainConfig(rounds=3, **TINY)
    kl = AnomalyConfig(kl_spike=1e-12, escalate_epochs=1, cooldown_updates=10, cooldown_epochs=100)
    events = _run(tmp_path, "auto", config, telemetry=_sensitive(kl, LSTMThresholds(), config))
    spikes = [e.payload for e in events if e.kind is EventKind.ANOMALY_DETECTED and e.payload.anomaly == "kl_spike"]
    assert spikes[0].auto_escalated and not any(s.auto_escalated for s in spikes[1:])
    statuses = [(p.command_id, p.status) for p in _payloads(events, CommandStatusChanged)]
    cid = statuses[0][0]
    assert cid.startswith("auto-")
    assert [s for c, s in statuses if c == cid] == [CommandStatus.DELIVERED, CommandStatus.APPLIED,
                                                    CommandStatus.COMPLETED]
    opened, _ = _window(events, cid)
    assert "auto: kl_spike" in opened.payload.reason
    assert _completed(events, cid).result["covered_update"] is True


def test_a_debug_window_on_the_batched_envs_sends_the_per_env_loops_distributions(tmp_path):
    """A debug window on a run of the batched envs (the default) sends each env's and scope's per-layer
    distributions, the same charts as the per-env loop's."""
    names = {}
    for env_exec in ("per-env", "batched"):
        config = TrainConfig(rounds=1, env_exec=env_exec, **TINY)  # type: ignore[arg-type]
        events = _run(tmp_path, f"dist-{env_exec}", config, plan={2: _debug("w", epochs=1)})
        opened, closed = _window(events, "w")
        names[env_exec] = {d.name for e in events if opened.seq < e.seq < closed.seq
                           and isinstance(e.payload, Histograms) for d in e.payload.histograms}
    assert {n for n in names["batched"] if n.startswith("debug/env1/host/gradients/")} == \
        {f"debug/env1/host/gradients/{name}" for name in _host_layers(TINY)}
    assert names["batched"] == names["per-env"]


def _host_layers(tiny: dict) -> list[str]:
    trainer = build_trainer(TrainConfig(**tiny), NullHooks(TelemetryLevel.OFF))
    return [name for name, _ in trainer.fresh_envs(1)[0].model.host.named_parameters()]
