"""Telemetry sites: the few places in the loop where collectors plug in.

The loop calls each site once at its point, with the live objects; ``NullSites`` does nothing,
so the loop has no ``if telemetry:`` branches. A collector that needs a sync does it inside
its own site, and only at the levels it chooses.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

    from trainer.kasmina.model import MorphogeneticModel
    from trainer.simic.ppo import PPOMetrics
    from trainer.tamiyo.policy import ActorCritic, LSTMState

PHASES: tuple[str, ...] = ("train", "validate", "policy", "act", "update")
"""Phase names passed to ``LoopSites.phase``."""

_NULL = contextlib.nullcontext()


class LoopSites(Protocol):
    def phase(self, name: str) -> AbstractContextManager[object]:
        """Wraps one phase of an epoch or round (see ``PHASES``) for timing and profiling."""
        ...

    def gradient_stride(self, default: int) -> int:
        """Batches between gradient measurements for the coming epoch (DEBUG may ask for 1)."""
        ...

    def after_backward(self, env: int, step: int, model: MorphogeneticModel) -> None:
        """On stride batches, after backward and before clipping: gradients are in ``.grad``.
        Called outside compiled regions (``torch.compiler.disable``)."""
        ...

    def after_epoch(self, round_: int, epoch: int, val_acc: torch.Tensor) -> None:
        """All envs finished ``epoch``; ``val_acc`` is [n_envs] on the CPU."""
        ...

    def after_update(self, round_: int, policy: ActorCritic, metrics: PPOMetrics, state: LSTMState) -> None:
        """After a PPO update: the policy (for per-layer stats), its metrics (for anomaly checks)
        and the LSTM state at the end of the rollout (for LSTM health)."""
        ...


class NullSites:
    """Sites that collect nothing."""

    def phase(self, name: str) -> AbstractContextManager[object]:
        return _NULL

    def gradient_stride(self, default: int) -> int:
        return default

    def after_backward(self, env: int, step: int, model: MorphogeneticModel) -> None:
        return None

    def after_epoch(self, round_: int, epoch: int, val_acc: torch.Tensor) -> None:
        return None

    def after_update(self, round_: int, policy: ActorCritic, metrics: PPOMetrics, state: LSTMState) -> None:
        return None
