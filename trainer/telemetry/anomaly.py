"""Anomaly detection: each finding is an ``anomaly_detected`` event with its reason and evidence.

Two cadences. ``check_all`` runs on every PPO update, on the update's real numbers: ratio
explosion and collapse, value collapse (the critic's estimates no longer vary, measured against
the spread of the returns they should track), entropy collapse (per head, normalised by the
head's size; a head that reports exactly 0 had no choice to make in the update and is skipped),
KL spike, NaN/Inf in any update metric, gradient norm, or LSTM state, gradient drift from the
bias-corrected EMA, and LSTM explosion and vanishing. ``check_epoch`` runs after every epoch on
the epoch's gradient collections and the loop's signals (``trainer.telemetry.epoch_checks``):
the faults an update would report a whole round late (a NaN or dead seed, a gradient explosion,
a drifting host, falling accuracy, a collapsed critic or policy entropy).

Auto-escalation: when a check finds an anomaly of ``escalate_on`` and an ``escalate`` callback is
given, it opens a DEBUG window through the run's command path (a locally submitted command,
reported like any other) and marks the finding ``auto_escalated``. A cooldown, in epochs (and in
updates where no epochs are counted), keeps a persistent anomaly from re-opening windows.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from leyline import AnomalyDetected
from leyline.commands import MAX_DEBUG_EPOCHS
from leyline.esper import LSTMHealth, PPOUpdate
from trainer.simic.sites import EpochSignals
from trainer.telemetry.ema import Drift
from trainer.telemetry.epoch_checks import EpochCheckConfig, EpochChecks, Finding
from trainer.telemetry.gradients import GradientStats

logger = logging.getLogger(__name__)

ANOMALIES: frozenset[str] = frozenset({
    "ratio_explosion", "ratio_collapse", "value_collapse", "entropy_collapse", "kl_spike", "nan_inf",
    "gradient_drift", "lstm_explosion", "lstm_vanishing", "gradient_explosion", "dead_seed", "loss_spike", "loss_drift",
    "performance_degradation", "straggler"})
# Every check fires on a change against the run's own history (or on broken numerics), so each is
# worth a DEBUG window: gradients every batch, per-layer stats and the LSTM state around the next
# update. (Explained variance is no longer judged on its own: with a couple of dozen decisions per
# update it swings between -0.8 and +0.4 in healthy runs and raised false alarms.)
ESCALATING: frozenset[str] = ANOMALIES - {"straggler"}  # more telemetry would slow a slow rank down


@dataclass(frozen=True)
class AnomalyConfig:
    """Thresholds of every check, and how auto-escalation behaves."""

    ratio_explosion: float = 5.0
    """Largest policy ratio new/old above which the update exploded."""
    ratio_collapse: float = 0.1
    """Smallest policy ratio under which the update collapsed."""
    value_spread: float = 1e-3
    """Spread (std) of the critic's estimates over the spread of the returns under which it collapsed."""
    entropy_collapse: float = 0.1
    """Entropy over log(head size) under which a head collapsed (heads of size 1 are skipped)."""
    kl_spike: float = 0.1
    """Approximate KL above which the update spiked."""
    drift_max: float = 2.0
    """Relative drift of the gradient norm from its EMA above which gradients drifted."""
    drift_min_updates: int = 5
    """EMA updates needed before drift is judged (the average must exist first)."""
    auto_escalate: bool = True
    """Open a DEBUG window when an anomaly is found (if the run gave an escalation path)."""
    escalate_on: frozenset[str] = ESCALATING
    """Anomalies that open a window."""
    escalate_epochs: int = 2
    """Epochs the auto-opened window lasts (it also covers the next PPO update)."""
    cooldown_epochs: int = 6
    """Epochs after an auto-escalation before another may be opened."""
    cooldown_updates: int = 3
    """PPO updates after an auto-escalation before another may be opened, where no epochs are counted."""
    epoch: EpochCheckConfig = field(default_factory=EpochCheckConfig)
    """Thresholds of the per-epoch checks."""

    def __post_init__(self) -> None:
        if not 0.0 < self.ratio_collapse < 1.0 < self.ratio_explosion:
            raise ValueError("need 0 < ratio_collapse < 1 < ratio_explosion")
        if not 0.0 < self.value_spread < 1.0:
            raise ValueError("value_spread must be in (0, 1)")
        if self.entropy_collapse < 0 or self.kl_spike <= 0 or self.drift_max <= 0:
            raise ValueError("entropy_collapse must be >= 0, kl_spike and drift_max > 0")
        if self.drift_min_updates < 1 or self.escalate_epochs < 1 or min(self.cooldown_updates,
                                                                         self.cooldown_epochs) < 0:
            raise ValueError("drift_min_updates and escalate_epochs must be >= 1, cooldowns >= 0")
        if self.escalate_epochs > MAX_DEBUG_EPOCHS:  # the window is a debug request, and so bounded
            raise ValueError(f"escalate_epochs must be <= {MAX_DEBUG_EPOCHS}, got {self.escalate_epochs}")
        if not self.escalate_on <= ANOMALIES:
            raise ValueError(f"escalate_on: unknown anomalies {sorted(self.escalate_on - ANOMALIES)}")


def _evidence(**values: float | None) -> dict[str, float]:
    # JSON has no NaN/Inf: a non-finite number is reported by name instead of by value.
    out: dict[str, float] = {}
    for key, value in values.items():
        if value is None:
            continue
        if math.isfinite(value):
            out[key] = float(value)
        else:
            out[f"{key}_nonfinite"] = 1.0
    return out


def _finding(anomaly: str, detail: str, **evidence: float | None) -> AnomalyDetected:
    return AnomalyDetected(anomaly=anomaly, detail=detail, evidence=_evidence(**evidence))


class AnomalyDetector:
    """Runs every check on a PPO update; may escalate to a DEBUG window by itself."""

    def __init__(self, config: AnomalyConfig | None = None,
                 escalate: Callable[[str, int], str | None] | None = None) -> None:
        """``escalate(reason, epochs)`` opens a DEBUG window covering the next update; returns its command id."""
        self.config = config or AnomalyConfig()
        self._escalate = escalate
        self._updates = 0
        self._epochs = 0
        self._last_escalation: tuple[int, int] | None = None  # (epochs, updates) when it happened
        self.escalations: list[str] = []
        self.epoch_checks = EpochChecks(self.config.epoch)

    def state_dict(self) -> dict[str, object]:
        """What later checks depend on (counters, cooldown, histories), for a checkpoint."""
        return {"updates": self._updates, "epochs": self._epochs, "last_escalation": self._last_escalation,
                "escalations": list(self.escalations), "epoch_checks": self.epoch_checks.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self._updates, self._epochs = int(state["updates"]), int(state["epochs"])
        last = state["last_escalation"]
        self._last_escalation = None if last is None else (int(last[0]), int(last[1]))
        self.escalations = list(state["escalations"])
        self.epoch_checks.load_state_dict(state["epoch_checks"])

    # --- single checks: each returns a finding or None -------------------------------------------

    def check_ratio(self, ratio_min: float, ratio_max: float) -> AnomalyDetected | None:
        c = self.config
        if math.isfinite(ratio_max) and ratio_max > c.ratio_explosion:
            return _finding("ratio_explosion", f"policy ratio max {ratio_max:.3g} > {c.ratio_explosion:g}",
                            ratio_max=ratio_max, ratio_min=ratio_min, threshold=c.ratio_explosion)
        if math.isfinite(ratio_min) and ratio_min < c.ratio_collapse:
            return _finding("ratio_collapse", f"policy ratio min {ratio_min:.3g} < {c.ratio_collapse:g}",
                            ratio_min=ratio_min, ratio_max=ratio_max, threshold=c.ratio_collapse)
        return None

    def check_value(self, value_std: float | None, return_std: float | None,
                    explained_variance: float | None = None) -> AnomalyDetected | None:
        """The critic's estimates over the round no longer vary while the returns they track do."""
        if value_std is None or return_std is None or not (math.isfinite(value_std) and math.isfinite(return_std)):
            return None
        limit = self.config.value_spread * return_std
        if return_std <= 0.0 or value_std >= limit:
            return None
        return _finding("value_collapse",
                        f"critic estimates spread {value_std:.3g} against returns spread {return_std:.3g}",
                        value_std=value_std, return_std=return_std, threshold=self.config.value_spread,
                        explained_variance=explained_variance)

    def check_entropy(self, entropy: Mapping[str, float],
                      head_sizes: Mapping[str, int]) -> AnomalyDetected | None:
        collapsed: dict[str, float] = {}
        for head, value in entropy.items():
            size = head_sizes.get(head, 0)
            # Exactly 0.0 means no step gave the head a choice (no op used it, or masks left one
            # legal action): nothing was learned there, so there is nothing to judge.
            if value == 0.0:
                continue
            if size > 1 and math.isfinite(value) and value / math.log(size) < self.config.entropy_collapse:
                collapsed[head] = value / math.log(size)
        if not collapsed:
            return None
        names = ", ".join(f"{h} {v:.3f}" for h, v in collapsed.items())
        return _finding("entropy_collapse", f"normalised entropy under {self.config.entropy_collapse:g}: {names}",
                        threshold=self.config.entropy_collapse, **{f"entropy_{h}": v for h, v in collapsed.items()})

    def check_kl(self, approx_kl: float) -> AnomalyDetected | None:
        if not math.isfinite(approx_kl) or approx_kl <= self.config.kl_spike:
            return None
        return _finding("kl_spike", f"approx KL {approx_kl:.3g} > {self.config.kl_spike:g}",
                        approx_kl=approx_kl, threshold=self.config.kl_spike)

    def check_numerics(self, values: Mapping[str, float | None], grads: GradientStats | None = None,
                       lstm: LSTMHealth | None = None) -> AnomalyDetected | None:
        bad = [k for k, v in values.items() if v is not None and not math.isfinite(v)]
        if grads is not None and grads.nonfinite:
            bad.append(f"gradients of {grads.scope} ({grads.nonfinite} tensors)")
        if lstm is not None and lstm.nonfinite:
            bad.append("LSTM state")
        if not bad:
            return None
        evidence = {k: v for k, v in values.items() if v is not None}
        if grads is not None:
            evidence["nonfinite_grad_tensors"] = float(grads.nonfinite)
        return _finding("nan_inf", "non-finite values in " + ", ".join(bad), **evidence)

    def check_gradient_drift(self, drift: Drift | None, scope: str = "policy") -> AnomalyDetected | None:
        c = self.config
        if drift is None or drift.drift is None or drift.updates <= c.drift_min_updates:
            return None
        if drift.drift <= c.drift_max:
            return None
        return _finding("gradient_drift", f"{scope} gradient norm drifted {drift.drift:.3g} from its EMA",
                        drift=drift.drift, ema_norm=drift.ema_norm, threshold=c.drift_max)

    def check_lstm(self, lstm: LSTMHealth | None) -> AnomalyDetected | None:
        if lstm is None:
            return None
        norms = dict(h_norm=lstm.h_norm, c_norm=lstm.c_norm, h_max=lstm.h_max, c_max=lstm.c_max)
        if lstm.exploding:
            return _finding("lstm_explosion", f"LSTM state norms h {lstm.h_norm:.3g}, c {lstm.c_norm:.3g}", **norms)
        if lstm.vanishing:
            return _finding("lstm_vanishing", f"LSTM hidden state norm {lstm.h_norm:.3g} vanished", **norms)
        return None

    # --- all of them -----------------------------------------------------------------------------

    def check_all(self, update: PPOUpdate, *, head_sizes: Mapping[str, int],
                  grads: GradientStats | None = None, drift: Drift | None = None,
                  lstm: LSTMHealth | None = None) -> list[AnomalyDetected]:
        """Every check on one PPO update; escalates once (cooldown permitting) if anything fired."""
        self._updates += 1
        numbers = {"policy_loss": update.policy_loss, "value_loss": update.value_loss,
                   "approx_kl": update.approx_kl, "grad_norm": update.grad_norm,
                   "ratio_min": update.ratio_min, "ratio_max": update.ratio_max,
                   "explained_variance": update.explained_variance,
                   **{f"entropy_{h}": v for h, v in update.entropy.items()}}
        found = [f for f in (
            self.check_numerics(numbers, grads, lstm),
            self.check_ratio(update.ratio_min, update.ratio_max),
            self.check_value(update.value_std, update.return_std, update.explained_variance),
            self.check_entropy(update.entropy, head_sizes),
            self.check_kl(update.approx_kl),
            self.check_gradient_drift(drift),
            self.check_lstm(lstm),
        ) if f is not None]
        return [f for _, f in self._escalate_first([(None, f) for f in found])]

    def check_epoch(self, signals: EpochSignals | None,
                    grads: Sequence[tuple[int, GradientStats]] = ()) -> list[Finding]:
        """The per-epoch checks on one epoch (``grads``: its gradient collections as (env, stats));
        escalates once (cooldown permitting) if anything started."""
        self._epochs += 1
        return self._escalate_first(self.epoch_checks.run(signals, grads))

    def forget_scope(self, env: int, scope: str) -> None:
        """A new seed took ``scope`` of ``env``: its history starts over."""
        self.epoch_checks.forget_scope(env, scope)

    def _escalate_first(self, found: list[Finding]) -> list[Finding]:
        urgent = [i for i, (_, f) in enumerate(found) if f.anomaly in self.config.escalate_on]
        if urgent and self._escalate is not None and self._may_escalate():
            env, finding = found[urgent[0]]
            found[urgent[0]] = (env, self._escalate_for(finding, self._escalate))
        return found

    def _may_escalate(self) -> bool:
        if not self.config.auto_escalate:
            return False
        if self._last_escalation is None:
            return True
        epochs, updates = self._last_escalation
        if self._epochs > epochs:
            return self._epochs - epochs >= self.config.cooldown_epochs
        return self._updates - updates > self.config.cooldown_updates

    def _escalate_for(self, finding: AnomalyDetected, escalate: Callable[[str, int], str | None]) -> AnomalyDetected:
        command_id = escalate(f"auto: {finding.anomaly}", self.config.escalate_epochs)
        if command_id is None:
            return finding
        self._last_escalation = (self._epochs, self._updates)
        self.escalations.append(command_id)
        logger.warning("anomaly %s: opened a DEBUG window (%s)", finding.anomaly, command_id)
        return msgspec.structs.replace(finding, auto_escalated=True)
