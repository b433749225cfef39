"""The seed lifecycle: stages, the legal transitions between them, and gates G1/G2/G3/G5.

A transition not in ``LEGAL_TRANSITIONS`` raises ``IllegalTransition``: a lifecycle bug must
surface, never turn into a silent no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from leyline.esper import SeedStage

S = SeedStage

LEGAL_TRANSITIONS: dict[SeedStage, frozenset[SeedStage]] = {
    S.DORMANT: frozenset({S.GERMINATED}),
    S.GERMINATED: frozenset({S.TRAINING, S.PRUNED}),
    S.TRAINING: frozenset({S.BLENDING, S.PRUNED}),
    S.BLENDING: frozenset({S.HOLDING, S.PRUNED}),
    S.HOLDING: frozenset({S.FOSSILIZED, S.BLENDING, S.PRUNED}),
    S.FOSSILIZED: frozenset(),
    S.PRUNED: frozenset({S.EMBARGOED}),
    S.EMBARGOED: frozenset({S.RESETTING}),
    S.RESETTING: frozenset({S.DORMANT}),
}

# Stage order for one-hot features and stage codes in tensors.
STAGES: tuple[SeedStage, ...] = tuple(SeedStage)
STAGE_CODE: dict[SeedStage, int] = {s: i for i, s in enumerate(STAGES)}

LIVE_STAGES = frozenset({S.GERMINATED, S.TRAINING, S.BLENDING, S.HOLDING})
"""A seed module exists and may still be pruned."""
INCUBATING_STAGES = frozenset({S.GERMINATED, S.TRAINING, S.PRUNED, S.EMBARGOED, S.RESETTING})
"""While any slot is in one of these, no new seed may be germinated in the env."""
BLENDED_STAGES = frozenset({S.BLENDING, S.HOLDING, S.FOSSILIZED})
"""The seed's output is part of the model's forward value (scaled by alpha)."""

STAGE_POTENTIAL: dict[SeedStage, float] = {
    S.GERMINATED: 1.0, S.TRAINING: 2.0, S.BLENDING: 3.5, S.HOLDING: 5.5, S.FOSSILIZED: 6.0,
}
"""Potentials for reward shaping; stages not listed have potential 0."""


class IllegalTransition(ValueError):
    """A lifecycle transition that the stage graph does not allow."""


def check_transition(src: SeedStage, dst: SeedStage) -> None:
    """Raise ``IllegalTransition`` unless ``src → dst`` is legal."""
    if dst not in LEGAL_TRANSITIONS[src]:
        allowed = ", ".join(s.value for s in sorted(LEGAL_TRANSITIONS[src], key=STAGE_CODE.__getitem__)) or "none"
        raise IllegalTransition(f"{src.value} → {dst.value} is illegal (allowed from {src.value}: {allowed})")


@dataclass(frozen=True)
class LifecycleConfig:
    """Thresholds of the gates, embargo and pruning."""

    min_training_epochs: int = 10
    """Epochs in TRAINING before G2 may pass."""
    embargo_epochs: int = 5
    """Epochs a pruned slot stays EMBARGOED."""
    min_prune_age: int = 5
    """A seed younger than this (in epochs) may not be pruned."""
    min_gradient_health: float = 0.7
    """G2 needs the seed's gradient-health EMA at least this high."""
    grad_ratio_clamp: float = 10.0
    """The seed/host gradient ratio is clamped here; reaching it counts as exploding."""
    grad_ema_decay: float = 0.9
    """Decay of the per-seed gradient-ratio and health EMAs."""

    def __post_init__(self) -> None:
        if min(self.min_training_epochs, self.embargo_epochs, self.min_prune_age) < 0:
            raise ValueError("lifecycle epoch counts must be >= 0")
        if not 0.0 <= self.min_gradient_health <= 1.0 or not 0.0 < self.grad_ema_decay < 1.0:
            raise ValueError("min_gradient_health must be in [0, 1] and grad_ema_decay in (0, 1)")


@dataclass(frozen=True)
class GateResult:
    """Outcome of one gate check, with the reason an operator can read."""

    gate: Literal["G1", "G2", "G3", "G5"]  # the names SeedGateEvaluated.gate takes
    passed: bool
    reason: str


@dataclass
class GradStats:
    """The seed's gradient measurements as of the last epoch's transfer (None: never measured)."""

    ratio_ema: float | None = None
    health: float | None = None
    norm: float | None = None
    vanishing: bool = False
    exploding: bool = False
    measurements: int = 0


def gate_g1(stage: SeedStage) -> GateResult:
    """G1 (to TRAINING): the seed is freshly germinated."""
    ok = stage is S.GERMINATED
    return GateResult("G1", ok, "germinated" if ok else f"stage is {stage.value}")


def gate_g2(stage: SeedStage, epochs_in_stage: int, grads: GradStats, cfg: LifecycleConfig) -> GateResult:
    """G2 (to BLENDING): trained long enough, gradients measured, healthy, none exploding."""
    if stage is not S.TRAINING:
        return GateResult("G2", False, f"stage is {stage.value}")
    if epochs_in_stage < cfg.min_training_epochs:
        return GateResult("G2", False, f"{epochs_in_stage}/{cfg.min_training_epochs} training epochs")
    if grads.measurements == 0 or grads.health is None:
        return GateResult("G2", False, "gradients not measured yet")
    if grads.exploding:
        return GateResult("G2", False, "gradients exploding")
    if grads.health < cfg.min_gradient_health:
        return GateResult("G2", False, f"gradient health {grads.health:.2f} < {cfg.min_gradient_health}")
    return GateResult("G2", True, f"healthy ({grads.health:.2f})")


def gate_g3(stage: SeedStage, alpha: float, holding: bool) -> GateResult:
    """G3 (to HOLDING): alpha reached 1.0 and the controller holds it there."""
    if stage is not S.BLENDING:
        return GateResult("G3", False, f"stage is {stage.value}")
    ok = alpha >= 1.0 - 1e-6 and holding
    return GateResult("G3", ok, "alpha at 1.0" if ok else f"alpha {alpha:.2f} not holding at 1.0")


def gate_g5(stage: SeedStage, contribution: float | None) -> GateResult:
    """G5 (to FOSSILIZED): a counterfactual contribution has been measured."""
    if stage is not S.HOLDING:
        return GateResult("G5", False, f"stage is {stage.value}")
    if contribution is None:
        return GateResult("G5", False, "contribution not measured")
    return GateResult("G5", True, f"contribution {contribution:+.4f}")
