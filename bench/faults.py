"""Faults injected into a real training loop, each at several doses, for the anomaly-detection benchmark.

Not a training feature: nothing here is reachable from ``esper-train``. A fault is applied through
the loop's own seams: ``FaultSites`` wraps the run's telemetry sites and, once the epoch named by
the fault has been checked, breaks something in ``trainer.envs`` (this round's hosts, seeds and
optimizers), ``trainer.agent.policy`` or ``trainer.data``. Its effect starts with the next epoch,
so a detection in epoch ``epoch + 1`` is a delay of one epoch. Each fault has a dose, from barely
harmful to extreme (``DOSES``); ``env`` says where it strikes (None: the whole run).
"""

from __future__ import annotations

import functools
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
    dose: float = 1.0
    """How hard it strikes, in the fault's own unit (``DOSES``)."""
    env: int | None = 0
    """The env it breaks; None: the whole run (the policy, the data): any env's anomaly names it."""

    @property
    def label(self) -> str:
        return f"{self.name}-x{self.dose:g}"


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


# --- the faults, each with its dose ---------------------------------------------------------------


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


def lr_spike(trainer: VectorizedTrainer, dose: float) -> None:
    """Env 0's host learning rate is multiplied by ``dose`` (a bad schedule, a typo in a config)."""
    for group in trainer.envs[0].host_opt.param_groups:
        group["lr"] *= dose


def nan_seed(trainer: VectorizedTrainer, dose: float) -> None:
    """Each gradient tensor of a training seed of env 0 is NaN with probability ``dose`` per batch
    (a rare overflow; one is enough to poison the seed through the clipping of its norm)."""
    gen = torch.Generator().manual_seed(trainer.epoch)
    _hook_all(_training_seed(trainer),
              lambda g: torch.full_like(g, math.nan) if float(torch.rand((), generator=gen)) < dose else g)


def dead_seed(trainer: VectorizedTrainer, dose: float) -> None:
    """A training seed of env 0 gets its gradients scaled by ``dose`` (0: none at all: a detached
    branch, a frozen module)."""
    _hook_all(_training_seed(trainer), lambda g: g * dose)


def value_collapse(trainer: VectorizedTrainer, dose: float) -> None:
    """The critic's output layer is scaled by ``dose`` and frozen (0: the value is one constant)."""
    last = _last_linear(trainer.agent.policy.critic)  # type: ignore[attr-defined]
    with torch.no_grad():
        last.weight.mul_(dose)
    last.weight.requires_grad_(False)


def entropy_collapse(trainer: VectorizedTrainer, dose: float) -> None:
    """Every action head's logits are scaled ``dose``-fold: the policy turns (near) deterministic."""
    with torch.no_grad():
        for head in trainer.agent.policy.heads:  # type: ignore[attr-defined]
            last = _last_linear(head)
            last.weight.mul_(dose)
            last.bias.mul_(dose)


def gradient_drift(trainer: VectorizedTrainer, dose: float) -> None:
    """Env 0's host gradients grow ``dose``-fold per epoch from now on (a slowly diverging loss scale)."""
    start = trainer.epoch
    _hook_all(trainer.envs[0].model.host, lambda g: g * dose ** (trainer.epoch - start))


def corrupt_labels(trainer: VectorizedTrainer, dose: float) -> None:
    """A share ``dose`` of the training labels is permuted (a broken data pipeline): every env learns
    from them."""
    y = trainer.data.train_y
    k = int(round(dose * y.shape[0]))
    perm = torch.roll(torch.arange(int(y.max()) + 1, device=y.device), 1)
    y[:k] = perm[y[:k]]


def _last_linear(module: nn.Module) -> nn.Linear:
    return [m for m in module.modules() if isinstance(m, nn.Linear)][-1]


@dataclass(frozen=True)
class Kind:
    """One kind of fault: what breaks it, what names it, and its doses from barely harmful to extreme."""

    name: str
    apply: Callable[[VectorizedTrainer, float], None]
    expect: frozenset[str]
    doses: tuple[float, ...]
    abrupt: bool = True
    policy: str = "ppo"
    env: int | None = 0


KINDS: tuple[Kind, ...] = (
    # With BatchNorm a spike shows in the loss and the accuracy more than in the gradients: the weights
    # grow and the gradients measured at the next stride are often back to normal.
    Kind("lr_spike", lr_spike, frozenset({"gradient_explosion", "loss_spike", "loss_drift", "nan_inf",
                                          "performance_degradation"}), (3, 10, 30, 100, 300)),
    Kind("nan_seed", nan_seed, frozenset({"nan_inf"}), (0.005, 0.02, 0.1, 1.0), policy="heuristic"),
    Kind("dead_seed", dead_seed, frozenset({"dead_seed"}), (0.3, 0.1, 0.01, 0.0), policy="heuristic"),
    Kind("value_collapse", value_collapse, frozenset({"value_collapse"}), (0.3, 0.1, 0.01, 0.0), env=None),
    Kind("entropy_collapse", entropy_collapse, frozenset({"entropy_collapse"}), (3, 10, 100, 1000), env=None),
    Kind("gradient_drift", gradient_drift, frozenset({"gradient_drift", "loss_drift"}), (1.1, 1.2, 1.5, 2.0),
         abrupt=False),
    Kind("label_corruption", corrupt_labels, frozenset({"performance_degradation", "loss_drift"}),
         (0.1, 0.2, 0.5, 1.0), env=None),
)
DOSES: dict[str, tuple[float, ...]] = {k.name: k.doses for k in KINDS}


def fault(kind: Kind, epoch: int, dose: float) -> Fault:
    return Fault(kind.name, epoch, kind.expect, kind.abrupt, functools.partial(kind.apply, dose=dose),
                 kind.policy, dose, kind.env)


def dosed_faults(epoch: int) -> list[Fault]:
    """Every fault at every dose, all injected after ``epoch`` (pick one that lies in a round after the
    first: the drift check compares with the same epoch of earlier rounds)."""
    return [fault(kind, epoch, dose) for kind in KINDS for dose in kind.doses]


def standard_faults(epoch: int) -> list[Fault]:
    """One of each fault at its extreme dose, injected after ``epoch``."""
    return [fault(kind, epoch, kind.doses[-1]) for kind in KINDS]
