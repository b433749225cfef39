"""Payloads of the policy update and the health collectors."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from leyline.enums import EventKind
from leyline.payloads import Payload


class PPOUpdate(Payload, kw_only=True, frozen=True):
    """One PPO update of the policy: losses, KL, clipping, entropy per head, value fit."""

    KIND: ClassVar[EventKind] = EventKind.PPO_UPDATE
    round: int
    policy_loss: float
    value_loss: float
    entropy: dict[str, float]
    approx_kl: float
    clip_fraction: float
    explained_variance: float | None
    ratio_min: float
    ratio_max: float
    grad_norm: float
    update_epochs: int
    early_stopped: bool = False
    mean_reward: float | None = None
    episode_return: float | None = None
    value_std: float | None = None
    """Spread (std) of the critic's estimates over the round's decisions, in return units."""
    return_std: float | None = None
    """Spread (std) of the returns those estimates track."""
    policy_digest: str | None = None
    """Digest of the policy's weights after the update, in runs of several ranks (the same on every rank:
    one policy); None alone."""


class GradientHealth(Payload, kw_only=True, frozen=True):
    """Gradient norms of one scope (the host, a seed slot, or the policy) at one collection."""

    KIND: ClassVar[EventKind] = EventKind.GRADIENT_HEALTH
    scope: str
    global_norm: float | None
    max_tensor_norm: float | None = None
    n_tensors: int = 0
    nonfinite: int = 0
    vanishing: bool = False
    exploding: bool = False
    ema_norm: float | None = None
    drift: float | None = None
    ratio: float | None = None


class LSTMHealth(Payload, kw_only=True, frozen=True):
    """Norms of the policy LSTM's hidden and cell states, and whether they are finite."""

    KIND: ClassVar[EventKind] = EventKind.LSTM_HEALTH
    h_norm: float
    c_norm: float
    h_max: float
    c_max: float
    nonfinite: bool = False
    exploding: bool = False
    vanishing: bool = False


class AnomalyDetected(Payload, kw_only=True, frozen=True):
    """A detector fired; ``evidence`` holds the numbers it saw."""

    KIND: ClassVar[EventKind] = EventKind.ANOMALY_DETECTED
    anomaly: str
    detail: str
    evidence: dict[str, float] = {}
    auto_escalated: bool = False
    rank: int | None = None
    """The rank the anomaly is about when it is not the rank that reports it (``straggler``)."""


class LayerStat(msgspec.Struct, kw_only=True, frozen=True):
    """Gradient and weight statistics of one parameter tensor."""

    name: str
    grad_norm: float
    grad_mean: float
    grad_std: float
    grad_abs_max: float
    weight_norm: float
    nonfinite: int = 0


class DebugLayerStats(Payload, kw_only=True, frozen=True):
    """Per-layer gradient statistics of one model, collected only at DEBUG."""

    KIND: ClassVar[EventKind] = EventKind.DEBUG_LAYER_STATS
    model: str
    layers: list[LayerStat]
