"""Esper's policy kinds: the PPO update of Tamiyo's policy and the health of its LSTM."""

from __future__ import annotations

from typing import ClassVar

from leyline.enums import Kind
from leyline.esper.enums import EsperKind
from leyline.payloads import Payload

# Static order of the policy's factored action heads; every tensor of heads follows it.
HEAD_NAMES: tuple[str, ...] = (
    "op",
    "slot",
    "blueprint",
    "style",
    "tempo",
    "alpha_target",
    "alpha_speed",
    "alpha_curve",
)


class PPOUpdate(Payload, kw_only=True, frozen=True):
    """One PPO update of the policy: losses, KL, clipping, entropy per head, value fit."""

    KIND: ClassVar[Kind] = EsperKind.PPO_UPDATE
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


class LSTMHealth(Payload, kw_only=True, frozen=True):
    """Norms of the policy LSTM's hidden and cell states, and whether they are finite."""

    KIND: ClassVar[Kind] = EsperKind.LSTM_HEALTH
    h_norm: float
    c_norm: float
    h_max: float
    c_max: float
    nonfinite: bool = False
    exploding: bool = False
    vanishing: bool = False
