"""Faults injected into a real training loop, for the anomaly-detection benchmark and its tests.

Not a training feature: nothing here is reachable from ``esper-train``. A fault is applied through
the loop's own seams: ``FaultSites`` wraps the run's telemetry sites and, once the epoch named by
the fault has been checked, breaks something in ``trainer.envs`` (this round's hosts, seeds and
optimizers), ``trainer.agent.policy`` or ``trainer.data``. Its effect starts with the next epoch,
so a detection in epoch ``epoch + 1`` is a delay of one epoch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainer.simic.sites import EpochSignals, LoopSites
from trainer.simic.vectorized import VectorizedTrainer


class FaultNotApplicable(RuntimeError):
    """The loop has nothing the fault can break at its epoch (e.g. no training seed in env 0)."""


@dataclass(frozen=True)
class Fault:
    """One fault: what it breaks, after which epoch, and which anomalies count as catching it."""

    name: str
    epoch: int
    """Global epoch after which the fault is injected (its effect starts with the next one)."""
    expect: frozenset[str]
    """Anomaly kinds that name this fault."""
    abrupt: bool
    """Abrupt faults should be caught within two epochs; slow ones only eventually."""
    apply: Callable[[VectorizedTrainer], None]
    policy: str = "ppo"
    """The policy of the run it is injected into (seed faults need the heuristic's predictable seeds)."""


class FaultSites:
    """The run's telemetry sites, plus one fault applied after the checks of ``fault.epoch``."""

    def __init__(self, inner: LoopSites, fault: Fault) -> None:
        self.inner, self.fault = inner, fault
        self.trainer: VectorizedTrainer | None = None
        self.applied_at: int | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def epoch_end(self, round_: int, env_epochs: int, signals: EpochSignals | None = None) -> Any:
        found = self.inner.epoch_end(round_, env_epochs, signals)
        trainer = self.trainer
        if trainer is not None and self.applied_at is None and trainer.epoch == self.fault.epoch:
            self.fault.apply(trainer)
            self.applied_at = trainer.epoch
        return found


# --- the faults ----------------------------------------------------------------------------------


def _training_seed(trainer: VectorizedTrainer) -> nn.Module:
    env = trainer.envs[0]
    for slot in env.slots:
        if slot.trainable and slot.seed is not None:
            return slot.seed
    raise FaultNotApplicable(f"env 0 has no training seed at epoch {trainer.epoch}")


def _hook_all(module: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    for p in module.parameters():
        if p.requires_grad:
            p.register_hook(fn)


def lr_spike(trainer: VectorizedTrainer) -> None:
    """Env 0's host learning rate jumps 300-fold (a bad schedule, a typo in a config)."""
    for group in trainer.envs[0].host_opt.param_groups:
        group["lr"] *= 300.0


def nan_seed(trainer: VectorizedTrainer) -> None:
    """A training seed of env 0 produces NaN gradients from now on."""
    _hook_all(_training_seed(trainer), lambda g: torch.full_like(g, math.nan))


def dead_seed(trainer: VectorizedTrainer) -> None:
    """A training seed of env 0 gets no gradient any more (a detached branch, a frozen module)."""
    _hook_all(_training_seed(trainer), torch.zeros_like)


def value_collapse(trainer: VectorizedTrainer) -> None:
    """The critic's output layer is zeroed and frozen: the value estimate is one constant."""
    last = _last_linear(trainer.agent.policy.critic)  # type: ignore[attr-defined]
    with torch.no_grad():
        last.weight.zero_()
    last.weight.requires_grad_(False)


def entropy_collapse(trainer: VectorizedTrainer) -> None:
    """Every action head's logits are scaled 1000-fold: the policy turns deterministic."""
    with torch.no_grad():
        for head in trainer.agent.policy.heads:  # type: ignore[attr-defined]
            last = _last_linear(head)
            last.weight.mul_(1000.0)
            last.bias.mul_(1000.0)


def gradient_drift(trainer: VectorizedTrainer) -> None:
    """Env 0's host gradients grow 1.5-fold per epoch from now on (a slowly diverging loss scale)."""
    start = trainer.epoch
    _hook_all(trainer.envs[0].model.host, lambda g: g * 1.5 ** (trainer.epoch - start))


def corrupt_labels(trainer: VectorizedTrainer) -> None:
    """The training labels are permuted (a broken data pipeline): accuracy falls in every env."""
    y = trainer.data.train_y
    perm = torch.roll(torch.arange(int(y.max()) + 1, device=y.device), 1)
    y.copy_(perm[y])


def _last_linear(module: nn.Module) -> nn.Linear:
    return [m for m in module.modules() if isinstance(m, nn.Linear)][-1]


def standard_faults(epoch: int) -> list[Fault]:
    """One of each fault, all injected after ``epoch`` (pick one that lies in a round after the first:
    the drift check compares with the same epoch of earlier rounds)."""
    return [
        Fault("lr_spike", epoch, frozenset({"gradient_explosion", "loss_spike", "nan_inf"}), True, lr_spike),
        Fault("nan_seed", epoch, frozenset({"nan_inf"}), True, nan_seed, policy="heuristic"),
        Fault("dead_seed", epoch, frozenset({"dead_seed"}), True, dead_seed, policy="heuristic"),
        Fault("value_collapse", epoch, frozenset({"value_collapse"}), True, value_collapse),
        Fault("entropy_collapse", epoch, frozenset({"entropy_collapse"}), True, entropy_collapse),
        Fault("gradient_drift", epoch, frozenset({"gradient_drift"}), False, gradient_drift),
        Fault("label_corruption", epoch, frozenset({"performance_degradation"}), True, corrupt_labels),
    ]
