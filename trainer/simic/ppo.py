"""PPO for the factored policy: ratio against rollout log-probs, clipped per head, KL early stop,
entropy per head, whole-episode truncated BPTT from each env's initial state.

With several ranks the update is data-parallel over the ranks' rollouts, as DistributedDataParallel
would make it, with the normalizations made global by hand: each rank's loss is its share of the loss
over every rank's decisions (advantages normalized with the mean and std of all of them, per-head and
value means over all of them), the gradients are summed over the ranks (one all-reduce per update
epoch), and the approx KL that may stop the update early is the mean over all of them. Every rank so
takes the same steps and stops at the same epoch: the weights stay equal and no rank waits at a
collective that another skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from leyline.esper import HEAD_NAMES
from ranks import Ranks
from trainer.flags import FieldError
from trainer.simic.rollout import RolloutBatch
from trainer.tamiyo.policy import ActorCritic


@dataclass(frozen=True)
class PPOConfig:
    """Hyper-parameters of the policy update (every one a flag of ``esper-train``: ``--ppo-<field>``)."""

    lr: float = 1e-3
    """Adam learning rate of the policy [GPU scale: 3e-4]. A CPU round holds only n_envs × (episode_length − 1)
    decisions (22 by default); at 3e-4 × 4 epochs one update moved the policy by an approx KL of about 2e-4, 1%
    of the 0.015 target, so the KL early stop never engaged and the critic stayed unfitted (explained variance
    near 0) for a whole run."""
    update_epochs: int = 8
    """Update epochs over each round's rollout; the KL early stop usually ends the update first [GPU scale: 4]."""
    clip: float = 0.2
    """Surrogate clip range, applied to every head's ratio."""
    target_kl: float = 0.015
    """KL target; the update stops once the approx KL exceeds ``kl_stop_factor`` × this."""
    kl_stop_factor: float = 1.5
    """How far past ``target_kl`` the approx KL may go before the update stops."""
    gamma: float = 0.995
    """Discount factor of the returns."""
    gae_lambda: float = 0.95
    """GAE lambda: 0 is one-step TD, 1 the Monte-Carlo return."""
    entropy_coef: float = 0.01
    """Entropy bonus weight, per head (heads an op did not use do not count)."""
    value_coef: float = 0.5
    """Weight of the value loss in the total loss."""
    max_grad_norm: float = 0.5
    """Gradient norm the policy's gradients are clipped to before each step."""
    normalize_advantages: bool = True
    """Normalize advantages to zero mean and unit std over the rollout (over every rank's decisions)."""

    def __post_init__(self) -> None:
        for name, ok, rule in (("lr", self.lr > 0, "> 0"), ("update_epochs", self.update_epochs >= 1, ">= 1"),
                               ("clip", 0 < self.clip < 1, "in (0, 1)"), ("target_kl", self.target_kl > 0, "> 0"),
                               ("kl_stop_factor", self.kl_stop_factor > 0, "> 0"),
                               ("gamma", 0 < self.gamma <= 1, "in (0, 1]"),
                               ("gae_lambda", 0 <= self.gae_lambda <= 1, "in [0, 1]"),
                               ("entropy_coef", self.entropy_coef >= 0, ">= 0"),
                               ("value_coef", self.value_coef >= 0, ">= 0"),
                               ("max_grad_norm", self.max_grad_norm > 0, "> 0")):
            if not ok:
                raise FieldError(name, f"must be {rule}, got {getattr(self, name)!r}")

    @property
    def kl_limit(self) -> float:
        return self.kl_stop_factor * self.target_kl


@dataclass(frozen=True)
class PPOMetrics:
    """What one update did, averaged over the update epochs that ran."""

    policy_loss: float
    value_loss: float
    entropy: dict[str, float]
    approx_kl: float
    clip_fraction: float
    explained_variance: float | None
    value_std: float
    """Spread of the critic's rollout estimates (return units)."""
    return_std: float
    """Spread of the returns they estimate."""
    ratio_min: float
    ratio_max: float
    grad_norm: float
    update_epochs: int
    early_stopped: bool
    losses: tuple[float, ...]
    """Total loss at the start of each update epoch (before its step)."""
    policy_digest: str | None = None
    """Digest of the weights after the update (runs of several ranks)."""


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float | None:
    var = returns.var(unbiased=False)
    if float(var) < 1e-12:
        return None
    return float(1.0 - (returns - values).var(unbiased=False) / var)


def _share(x: torch.Tensor, decisions: torch.Tensor | None) -> torch.Tensor:
    """This rank's share of the mean of ``x`` over every rank's decisions (alone: the mean)."""
    return x.mean() if decisions is None else x.sum() / decisions


def _normalized(adv: torch.Tensor, ranks: Ranks) -> torch.Tensor:
    """Advantages over their mean and std, those of every rank's advantages."""
    if not ranks.distributed:
        return (adv - adv.mean()) / (adv.std() + 1e-8)
    moments = ranks.sum_(torch.stack([adv.sum(), adv.pow(2).sum(), adv.new_tensor(float(adv.numel()))]))
    n = moments[2]
    mean = moments[0] / n
    var = ((moments[1] - n * mean * mean) / (n - 1).clamp_min(1.0)).clamp_min(0.0)
    return (adv - mean) / (var.sqrt() + 1e-8)


EPOCH_STATS = ("loss", "policy_loss", "value_loss", "approx_kl", "clip_fraction", "ratio_min", "ratio_max",
               "grad_norm")
"""The figures of one update epoch, in the order they travel in one tensor (each head's entropy follows,
as ``entropy.<head>``)."""

STAT_NAMES = EPOCH_STATS + tuple(f"entropy.{head}" for head in HEAD_NAMES)

# How each figure is made whole across ranks: each rank holds its share of a loss or an entropy (summed);
# KL and the gradient norm are already the same on every rank; the clip fraction is averaged; the ratio
# extremes are those of every rank.
_ACROSS_RANKS = {"approx_kl": "same", "grad_norm": "same", "clip_fraction": "mean", "ratio_min": "min",
                 "ratio_max": "max"}


def clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, clip: float) -> torch.Tensor:
    """PPO's pessimistic objective per decision and head: the lesser of the unclipped and the clipped
    ratio times the advantage (the policy gains nothing by moving a ratio past ``1 ± clip``)."""
    return torch.minimum(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)


def policy_loss(ratio: torch.Tensor, advantages: torch.Tensor, used: torch.Tensor, head_counts: torch.Tensor,
                clip: float) -> torch.Tensor:
    """Minus the clipped surrogate, averaged per head over the decisions that used it, summed over heads.
    ``ratio`` and ``used`` are [E, T, heads], ``advantages`` [E, T]."""
    surrogate = clipped_surrogate(ratio, advantages[..., None], clip)
    return -((surrogate * used).sum(dim=(0, 1)) / head_counts).sum()


def value_loss(values: torch.Tensor, targets: torch.Tensor, decisions: torch.Tensor | None = None) -> torch.Tensor:
    """Half the mean squared error of the critic against its targets (this rank's share with several)."""
    return 0.5 * _share((values - targets).pow(2), decisions)


def _across_ranks(stats: torch.Tensor, ranks: Ranks) -> torch.Tensor:
    """Each epoch's figures [epochs, STAT_NAMES] for the whole update (see ``_ACROSS_RANKS``)."""
    if not ranks.distributed:
        return stats
    total = ranks.sum_(stats.clone())
    out = total.clone()
    for i, name in enumerate(STAT_NAMES):
        how = _ACROSS_RANKS.get(name, "sum")
        if how == "same":
            out[:, i] = stats[:, i]
        elif how == "mean":
            out[:, i] = total[:, i] / ranks.world_size
        elif how == "min":
            out[:, i] = ranks.min_(stats[:, i].clone())
        elif how == "max":
            out[:, i] = ranks.max_(stats[:, i].clone())
    return out


def ppo_update(policy: ActorCritic, optimizer: torch.optim.Optimizer, batch: RolloutBatch,
               cfg: PPOConfig, after_backward: Callable[[nn.Module], None] | None = None,
               ranks: Ranks | None = None) -> PPOMetrics:
    """Several epochs over one round's rollout; one sync per epoch for the KL check. With several
    ``ranks``, over every rank's rollout (see the module docstring)."""
    ranks = ranks or Ranks.single()
    adv = batch.advantages
    if cfg.normalize_advantages and adv.numel() > 1:
        adv = _normalized(adv, ranks)
    used = policy.causal[batch.actions[..., 0]].float()
    state0 = policy.initial_state(batch.obs.shape[0], batch.obs.device)
    targets = batch.returns if batch.value_targets is None else batch.value_targets
    head_counts = ranks.sum_(used.sum(dim=(0, 1))).clamp_min(1.0)
    # Every rank's decisions, what a mean is over with several ranks (alone: None, plain means).
    decisions = ranks.sum_(used.new_tensor(float(adv.numel()))) if ranks.distributed else None
    rows: list[torch.Tensor] = []
    early = False
    for _ in range(cfg.update_epochs):
        log_probs, entropy, values = policy.evaluate(batch.obs, batch.op_mask, batch.slot_mask,
                                                     batch.actions, state0)
        log_ratio = log_probs - batch.log_probs
        ratio = log_ratio.exp()
        joint = log_ratio.sum(-1)
        approx_kl = ranks.sum_(_share(((joint.exp() - 1) - joint).detach(), decisions))
        if rows and float(approx_kl) > cfg.kl_limit:
            early = True
            break
        pi_loss = policy_loss(ratio, adv, used, head_counts, cfg.clip)
        head_entropy = (entropy * used).sum(dim=(0, 1)) / head_counts
        v_loss = value_loss(values, targets, decisions)
        loss = pi_loss + cfg.value_coef * v_loss - cfg.entropy_coef * head_entropy.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        ranks.sum_grads_(policy.parameters())
        if after_backward is not None:
            after_backward(policy)
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
        optimizer.step()
        clipped = _masked_mean(((ratio - 1).abs() > cfg.clip).float(), used)
        big = torch.finfo(ratio.dtype).max
        ratio_min = ratio.masked_fill(used == 0, big).min()
        ratio_max = ratio.masked_fill(used == 0, -big).max()
        figures = (loss, pi_loss, v_loss, approx_kl, clipped, ratio_min, ratio_max, grad_norm)
        rows.append(torch.cat([torch.stack(figures).detach(), head_entropy.detach()]))
    # One transfer for every epoch's figures, then read by name.
    epochs = [dict(zip(STAT_NAMES, row, strict=True)) for row in _across_ranks(torch.stack(rows), ranks).tolist()]
    return _metrics(epochs, batch, early)


def _metrics(epochs: list[dict[str, float]], batch: RolloutBatch, early: bool) -> PPOMetrics:
    """The update's figures: each epoch's mean, the ratio extremes over every epoch."""
    def mean(name: str) -> float:
        return sum(e[name] for e in epochs) / len(epochs)

    values, returns = batch.values.detach().cpu(), batch.returns.detach().cpu()
    return PPOMetrics(
        policy_loss=mean("policy_loss"), value_loss=mean("value_loss"),
        entropy={head: mean(f"entropy.{head}") for head in HEAD_NAMES},
        approx_kl=mean("approx_kl"), clip_fraction=mean("clip_fraction"),
        explained_variance=explained_variance(values, returns),
        value_std=float(values.std(unbiased=False)), return_std=float(returns.std(unbiased=False)),
        ratio_min=min(e["ratio_min"] for e in epochs), ratio_max=max(e["ratio_max"] for e in epochs),
        grad_norm=mean("grad_norm"), update_epochs=len(epochs), early_stopped=early,
        losses=tuple(e["loss"] for e in epochs))
