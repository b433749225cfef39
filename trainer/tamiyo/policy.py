"""The LSTM actor-critic: feature net → LSTM → one head per action head, and a critic.

Sampling is op-first: the op is drawn under its mask, the slot under the chosen op's slot mask,
then the other heads. Heads the op does not use take index 0 and log-prob 0 (causal masks),
so only the heads an action really used get credit in the PPO loss.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
from torch import nn

from trainer.compiling import compiled
from trainer.tamiyo.actions import CAUSAL_HEADS, head_sizes

_MASKED = -1e9  # finite so that masked entries give p·log p = 0, never NaN
LSTMState = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class PolicyConfig:
    """Shape of the actor-critic."""

    obs_dim: int
    """Observation features."""
    n_slots: int
    """Size of the slot head."""
    hidden: int = 64
    """Width of the feature net and the LSTM [GPU scale: 512]."""

    def __post_init__(self) -> None:
        if self.obs_dim < 1 or self.n_slots < 1 or self.hidden < 4:
            raise ValueError(f"invalid policy shape: {self}")


@dataclass(frozen=True)
class ActOutput:
    """One batched step for all envs; every tensor stays on the policy's device."""

    actions: torch.Tensor
    """[B, n_heads] head indices (``HEAD_NAMES`` order)."""
    log_probs: torch.Tensor
    """[B, n_heads] log-probabilities of the chosen indices (0 for heads the op does not use)."""
    value: torch.Tensor
    """[B] critic estimate."""
    state: LSTMState
    entropy: torch.Tensor | None = None
    """[B] mean over the heads with a choice of each head's entropy over log(legal choices):
    1 is uniform, 0 deterministic."""


def masked_log_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits.masked_fill(~mask, _MASKED), dim=-1)


def normalized_entropy(log_probs: list[torch.Tensor], masks: list[torch.Tensor]) -> torch.Tensor:
    """[B] mean of H(head) / log(legal choices) over the heads with at least two legal choices;
    ``masks`` give the legal choices of the first heads, the others have all of theirs."""
    total = torch.zeros(log_probs[0].shape[0], device=log_probs[0].device)
    count = torch.zeros_like(total)
    for i, lp in enumerate(log_probs):
        legal = masks[i].sum(-1).float() if i < len(masks) else torch.full_like(total, lp.shape[-1])
        has_choice = legal >= 2
        h = -(lp.exp() * lp).sum(-1) / legal.clamp_min(2).log()
        total += torch.where(has_choice, h, 0.0)
        count += has_choice.float()
    return total / count.clamp_min(1.0)


def _mlp(d_in: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, max(d_in // 2, 4)), nn.ReLU(), nn.Linear(max(d_in // 2, 4), d_out))


class ActorCritic(nn.Module):
    causal: torch.Tensor

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        self.config = config
        h = config.hidden
        self.feature = nn.Sequential(nn.Linear(config.obs_dim, h), nn.LayerNorm(h), nn.ReLU())
        self.lstm = nn.LSTM(h, h, batch_first=True)
        self.heads = nn.ModuleList(_mlp(h, size) for size in head_sizes(config.n_slots))
        self.critic = _mlp(h, 1)
        self.register_buffer("causal", CAUSAL_HEADS.clone(), persistent=False)
        self._compiled_step = self._step
        self._compiled_evaluate = self._evaluate
        self._tracing: AbstractContextManager[object] = contextlib.nullcontext()

    def initial_state(self, batch: int, device: torch.device | None = None) -> LSTMState:
        zeros = torch.zeros(1, batch, self.config.hidden, device=device)
        return zeros, zeros.clone()

    def _trunk(self, obs: torch.Tensor, state: LSTMState) -> tuple[torch.Tensor, LSTMState]:
        z, new_state = self.lstm(self.feature(obs), state)
        return z, (new_state[0], new_state[1])

    def _step(self, obs: torch.Tensor, state: LSTMState) -> tuple[torch.Tensor, list[torch.Tensor], LSTMState]:
        """One decision's tensor work for obs [B, D]: every head's logits and the value (compiled)."""
        z, new_state = self._trunk(obs[:, None], state)
        z = z[:, 0]
        return self.critic(z)[:, 0], [head(z) for head in self.heads], new_state

    @staticmethod
    def _log_probs(logits: list[torch.Tensor], op_mask: torch.Tensor, slot_mask: torch.Tensor,
                   op: torch.Tensor | None) -> list[torch.Tensor]:
        """Per-head log-softmax; the slot head is masked by the slot mask of ``op``."""
        op_lp = masked_log_softmax(logits[0], op_mask)
        if op is None:  # sampling: the op is drawn first, then the slot under its mask
            return [op_lp]
        n_slots = slot_mask.shape[-1]
        index = op[..., None, None].expand(*op.shape, 1, n_slots)
        allowed = slot_mask.gather(-2, index).squeeze(-2)
        return [op_lp, masked_log_softmax(logits[1], allowed),
                *(torch.log_softmax(lg, dim=-1) for lg in logits[2:])]

    @torch.no_grad()
    def act(self, obs: torch.Tensor, state: LSTMState, op_mask: torch.Tensor, slot_mask: torch.Tensor,
            generator: torch.Generator | None = None) -> ActOutput:
        """Sample one action per env from obs [B, D] and masks [B, n_ops], [B, n_ops, n_slots].

        The heads' logits come from one (compiled, when compiled) step; the draws stay eager:
        Dynamo cannot trace sampling from a ``torch.Generator``."""
        with self._tracing:
            value, logits, new_state = self._compiled_step(obs, state)
        op = torch.multinomial(self._log_probs(logits, op_mask, slot_mask, None)[0].exp(), 1, generator=generator)[:, 0]
        lps = self._log_probs(logits, op_mask, slot_mask, op)
        picks = [op] + [torch.multinomial(lp.exp(), 1, generator=generator)[:, 0] for lp in lps[1:]]
        actions = torch.stack(picks, dim=1)
        chosen = torch.stack([lp.gather(-1, a[:, None])[:, 0] for lp, a in zip(lps, picks, strict=True)], dim=1)
        used = self.causal[op]
        allowed = [op_mask, lps[1] > _MASKED / 2]
        return ActOutput(actions.where(used, 0), chosen.where(used, 0.0), value, new_state,
                         normalized_entropy(lps, allowed))

    def evaluate(self, obs: torch.Tensor, op_mask: torch.Tensor, slot_mask: torch.Tensor,
                 actions: torch.Tensor, state: LSTMState) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Whole sequences [B, T, …] from ``state``: (log_probs, entropy) [B, T, n_heads] masked
        causally, and values [B, T] (one compiled graph, forward and backward, when compiled)."""
        with self._tracing:
            return self._compiled_evaluate(obs, op_mask, slot_mask, actions, state)

    def _evaluate(self, obs: torch.Tensor, op_mask: torch.Tensor, slot_mask: torch.Tensor,
                  actions: torch.Tensor, state: LSTMState) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        z, _ = self._trunk(obs, state)
        op = actions[..., 0]
        lps = self._log_probs([head(z) for head in self.heads], op_mask, slot_mask, op)
        chosen = torch.stack([lp.gather(-1, actions[..., i: i + 1])[..., 0] for i, lp in enumerate(lps)], dim=-1)
        entropy = torch.stack([-(lp.exp() * lp).sum(-1) for lp in lps], dim=-1)
        used = self.causal[op].to(chosen.dtype)
        return chosen * used, entropy * used, self.critic(z)[..., 0]

    def compile_policy(self, mode: str) -> None:
        """Compile the decision step and the update's evaluation, each as one full graph
        (``fullgraph=True``: a graph break is an error, not a silent split). Each policy gets its
        own regions (``isolate_recompiles``): its shapes are fixed for a run ([n_envs] per
        decision, [n_envs, T] per update), so each region compiles once."""
        # Dynamo breaks the graph at nn.LSTM unless allowed; the flag is read only while it traces.
        self._tracing = torch._dynamo.config.patch(allow_rnn=True)
        self._compiled_step = compiled(self._step, mode=mode, name="policy_step")
        self._compiled_evaluate = compiled(self._evaluate, mode=mode, name="policy_evaluate")
