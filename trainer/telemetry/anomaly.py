"""Anomaly detection on the PPO update: each finding is an ``anomaly_detected`` event with evidence.

Checks (all run by ``check_all``, every PPO update, on the update's real numbers):
ratio explosion and collapse, value collapse (explained variance under a threshold
that tightens as training progresses: early on a critic may still be anti-correlated),
entropy collapse (per head, normalised by the head's size; a head that reports exactly 0
had no choice to make in the update and is skipped), KL spike, NaN/Inf in any
update metric, gradient norm, or LSTM state, gradient drift from the bias-corrected EMA,
and LSTM explosion and vanishing.

Auto-escalation: when ``check_all`` finds an anomaly of ``escalate_on`` and an ``escalate``
callback is given, it opens a DEBUG window through the run's command path (a locally submitted
command, reported like any other) and marks the finding ``auto_escalated``. A cooldown
in PPO updates keeps a persistent anomaly from re-opening windows every update.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import msgspec

from leyline import AnomalyDetected, LSTMHealth, PPOUpdate

from trainer.telemetry.ema import Drift
from trainer.telemetry.gradients import GradientStats

logger = logging.getLogger(__name__)

# (training progress up to, lowest acceptable explained variance): warm-up, early, mid, late.
DEFAULT_EV_SCHEDULE: tuple[tuple[float, float], ...] = ((0.1, -0.5), (0.25, -0.2), (0.75, 0.0), (1.0, 0.1))
ANOMALIES: frozenset[str] = frozenset({"ratio_explosion", "ratio_collapse", "value_collapse", "entropy_collapse",
                                       "kl_spike", "nan_inf", "gradient_drift", "lstm_explosion", "lstm_vanishing"})
# A DEBUG window shows gradients, per-layer stats and the LSTM state around the next update: it
# helps with sudden numerical trouble. A critic that fits badly or a policy losing entropy is a
# slow trend the events already show; escalating on it would keep short runs at DEBUG.
ESCALATING: frozenset[str] = ANOMALIES - {"value_collapse", "entropy_collapse"}


@dataclass(frozen=True)
class AnomalyConfig:
    """Thresholds of every check, and how auto-escalation behaves."""

    ratio_explosion: float = 5.0
    """Largest policy ratio new/old above which the update exploded."""
    ratio_collapse: float = 0.1
    """Smallest policy ratio under which the update collapsed."""
    ev_schedule: tuple[tuple[float, float], ...] = DEFAULT_EV_SCHEDULE
    """(progress up to, min explained variance) pairs, progress ascending, the last at 1.0."""
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
    """Anomalies that open a window; slow learning-quality signals (value, entropy) only report."""
    escalate_epochs: int = 2
    """Epochs the auto-opened window lasts (it also covers the next PPO update)."""
    cooldown_updates: int = 3
    """PPO updates after an auto-escalation before another may be opened."""

    def __post_init__(self) -> None:
        if not 0.0 < self.ratio_collapse < 1.0 < self.ratio_explosion:
            raise ValueError("need 0 < ratio_collapse < 1 < ratio_explosion")
        bounds = [p for p, _ in self.ev_schedule]
        if not bounds or bounds != sorted(bounds) or bounds[-1] != 1.0:
            raise ValueError("ev_schedule needs ascending progress bounds ending at 1.0")
        if self.entropy_collapse < 0 or self.kl_spike <= 0 or self.drift_max <= 0:
            raise ValueError("entropy_collapse must be >= 0, kl_spike and drift_max > 0")
        if self.drift_min_updates < 1 or self.escalate_epochs < 1 or self.cooldown_updates < 0:
            raise ValueError("drift_min_updates and escalate_epochs must be >= 1, cooldown_updates >= 0")
        if not self.escalate_on <= ANOMALIES:
            raise ValueError(f"escalate_on: unknown anomalies {sorted(self.escalate_on - ANOMALIES)}")

    def ev_threshold(self, progress: float) -> float:
        """Lowest acceptable explained variance at ``progress`` (0 = start, 1 = end of training)."""
        for upto, threshold in self.ev_schedule:
            if progress <= upto:
                return threshold
        return self.ev_schedule[-1][1]


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
        self._last_escalation: int | None = None
        self.escalations: list[str] = []

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

    def check_value(self, explained_variance: float | None, progress: float) -> AnomalyDetected | None:
        if explained_variance is None or not math.isfinite(explained_variance):
            return None
        threshold = self.config.ev_threshold(progress)
        if explained_variance >= threshold:
            return None
        return _finding("value_collapse",
                        f"explained variance {explained_variance:.3g} < {threshold:g} at progress {progress:.0%}",
                        explained_variance=explained_variance, threshold=threshold, progress=progress)

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

    def check_all(self, update: PPOUpdate, *, progress: float, head_sizes: Mapping[str, int],
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
            self.check_value(update.explained_variance, progress),
            self.check_entropy(update.entropy, head_sizes),
            self.check_kl(update.approx_kl),
            self.check_gradient_drift(drift),
            self.check_lstm(lstm),
        ) if f is not None]
        urgent = [i for i, f in enumerate(found) if f.anomaly in self.config.escalate_on]
        if urgent and self._escalate is not None and self._may_escalate():
            found[urgent[0]] = self._escalate_for(found[urgent[0]], self._escalate)
        return found

    def _may_escalate(self) -> bool:
        if not self.config.auto_escalate:
            return False
        return self._last_escalation is None or self._updates - self._last_escalation > self.config.cooldown_updates

    def _escalate_for(self, finding: AnomalyDetected, escalate: Callable[[str, int], str | None]) -> AnomalyDetected:
        command_id = escalate(f"auto: {finding.anomaly}", self.config.escalate_epochs)
        if command_id is None:
            return finding
        self._last_escalation = self._updates
        self.escalations.append(command_id)
        logger.warning("anomaly %s: opened a DEBUG window (%s)", finding.anomaly, command_id)
        return msgspec.structs.replace(finding, auto_escalated=True)
