"""Telemetry sites: the few places in the loop where collectors plug in.

``LoopSites`` is what the loop calls, one small call per site; ``trainer.telemetry``'s
``SimicTelemetry`` implements it, ``NullSites`` does nothing (so the loop has no
``if telemetry:`` branches). Sites, in loop order:

- ``phases.phase(name)`` around each phase (``TRAIN`` … ``PPO_UPDATE``);
- ``gradients_due(step)`` once per batch; when due, ``collect_env(env, modules)`` after each
  env's backward (before clipping), or ``collect_flat(grads)`` once after the batched envs'
  backward, then ``flush_gradients()`` once all envs stepped;
- ``forget_scope(env, slot)`` when a new seed takes a slot;
- ``update_begin()``, ``policy_backward(policy)`` after each PPO backward, and
  ``after_update(update, progress=, lstm_state=)`` after the update;
- ``epoch_end(round_, env_epochs, signals)`` after every epoch, with what the epoch measured
  (``EpochSignals``: accuracy and losses per env, the policy's last decision) for the per-epoch
  checks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from leyline.esper import PPOUpdate

if TYPE_CHECKING:
    from trainer.simic.batched import FlatGradients

TRAIN, VALIDATION, ROLLOUT, ACTION, PPO_UPDATE = "train", "validation", "rollout", "action", "ppo_update"
"""Phase names: training batches, fused validation, the policy decision, applying actions, the update."""

_NULL = contextlib.nullcontext()


@dataclass(frozen=True)
class PolicySignals:
    """What the policy's decision of this epoch showed, per env (read with the decision's one transfer)."""

    values: tuple[float, ...]
    """The critic's estimate per env (in the critic's own, normalized units)."""
    entropy: tuple[float, ...]
    """Mean normalized entropy of the action heads per env: 1 uniform over the legal choices, 0 deterministic."""


@dataclass(frozen=True)
class EpochSignals:
    """What every env measured in one epoch, for the per-epoch health checks."""

    round: int
    epoch_in_round: int
    """1 for the first epoch of a round (fresh hosts)."""
    accuracy: tuple[float, ...]
    """Validation accuracy per env."""
    val_loss: tuple[float, ...]
    train_loss: tuple[float, ...]
    policy: PolicySignals | None = None
    """None when no learned policy decided this epoch (the heuristic, or an episode's last epoch)."""


class PhaseSite(Protocol):
    def phase(self, name: str) -> AbstractContextManager[Any]: ...


class LoopSites(Protocol):
    @property
    def phases(self) -> PhaseSite: ...

    def gradients_due(self, batch: int) -> bool:
        """Collect gradient telemetry after this batch's backward (``batch`` counts from 0)?"""
        ...

    def collect_env(self, env: int, modules: Mapping[str, nn.Module]) -> None:
        """Launch gradient measurements of one env's scopes ("host" and each training seed's slot)."""
        ...

    def collect_flat(self, grads: FlatGradients) -> None:
        """Launch gradient measurements of every env's scopes of the batched envs at once."""
        ...

    def flush_gradients(self) -> None:
        """Every env of this batch has been collected: read and report them."""
        ...

    def forget_scope(self, env: int, scope: str) -> None:
        """A new seed took slot ``scope`` of ``env``: its gradient history starts over."""
        ...

    def update_begin(self) -> None: ...

    def policy_backward(self, policy: nn.Module) -> None:
        """After a backward of the PPO update (the policy's gradients are in ``.grad``)."""
        ...

    def after_update(self, update: PPOUpdate, *, progress: float,
                     lstm_state: tuple[torch.Tensor, torch.Tensor] | None = None) -> Any:
        """After the update: its figures, how far the run is (0..1), the rollout's final LSTM state."""
        ...

    def epoch_end(self, round_: int, env_epochs: int, signals: EpochSignals | None = None) -> Any:
        """All envs finished an epoch (``env_epochs`` of them); ``signals``: what it measured."""
        ...


class _NullPhases:
    def phase(self, name: str) -> AbstractContextManager[Any]:
        return _NULL


class NullSites:
    """Sites that collect nothing."""

    phases: PhaseSite = _NullPhases()

    def gradients_due(self, batch: int) -> bool:
        return False

    def collect_env(self, env: int, modules: Mapping[str, nn.Module]) -> None:
        return None

    def collect_flat(self, grads: FlatGradients) -> None:
        return None

    def flush_gradients(self) -> None:
        return None

    def forget_scope(self, env: int, scope: str) -> None:
        return None

    def update_begin(self) -> None:
        return None

    def policy_backward(self, policy: nn.Module) -> None:
        return None

    def after_update(self, update: PPOUpdate, *, progress: float,
                     lstm_state: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        return None

    def epoch_end(self, round_: int, env_epochs: int, signals: EpochSignals | None = None) -> None:
        return None
