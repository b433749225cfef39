"""The vectorized Esper loop: n_envs hosts step together, one policy decision for all envs per epoch.

A round = fresh hosts, one episode of T epochs, then one policy update. An epoch =
lifecycle ticks → train every env on each batch (all envs as one batched model, ``simic.batched``;
or env by env, each on its CUDA stream, with ``--env-exec per-env``) → fused counterfactual
validation → ONE device→host transfer of every env's metrics → rewards (tensor ops over all envs)
→ one batched policy decision (ONE transfer of all action heads) → apply the actions.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from leyline import AnyPayload, TelemetryLevel
from leyline.esper import EpochCompleted, PPOUpdate, SeedGerminated, SeedStage
from trainer.data import TaskData
from trainer.hooks import RunHooks
from trainer.kasmina.lifecycle import BLENDED_STAGES, STAGE_CODE
from trainer.simic.agent import Agent
from trainer.simic.batched import batched_envs
from trainer.simic.env import Env, EnvConfig
from trainer.simic.graphs import graphed_step
from trainer.simic.ppo import PPOMetrics
from trainer.simic.reward import RewardConfig, RewardInputs, compute_rewards
from trainer.simic.runtime import DeviceRuntime
from trainer.simic.sites import ACTION, PPO_UPDATE, ROLLOUT, TRAIN, VALIDATION, EpochSignals, LoopSites
from trainer.tamiyo.actions import Action
from trainer.tamiyo.masks import SlotView, compute_masks

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoundResult:
    """What one round achieved."""

    round: int
    episode_return: list[float]
    """Raw (unnormalized) reward summed over the episode, per env."""
    final_accuracy: list[float]
    fossilized: int
    pruned: int
    ppo: PPOMetrics | None


@dataclass
class _Decision:
    """The previous epoch's decision, kept until its reward is measured."""

    potential: torch.Tensor
    actions: list[Action]


class RoundStopped(Exception):
    """The run was asked to stop: its round ended at the end of an epoch, before its PPO update."""

    def __init__(self, round_: int, epoch_in_round: int) -> None:
        super().__init__(f"stopped in round {round_} after epoch {epoch_in_round}")
        self.round, self.epoch_in_round = round_, epoch_in_round


class VectorizedTrainer:
    def __init__(self, env_cfg: EnvConfig, reward_cfg: RewardConfig, data: TaskData, runtime: DeviceRuntime,
                 agent: Agent, hooks: RunHooks, sites: LoopSites, *, n_envs: int, batch_size: int,
                 gradient_stride: int, seed: int, rounds: int, env_exec: str = "batched",
                 cuda_graphs: bool = False, on_epoch: Callable[[int, int, list[float]], None] | None = None) -> None:
        self.env_cfg, self.reward_cfg, self.data, self.runtime = env_cfg, reward_cfg, data, runtime
        self.agent, self.hooks, self.sites = agent, hooks, sites
        self.n_envs, self.batch_size, self.gradient_stride, self.seed = n_envs, batch_size, gradient_stride, seed
        self.rounds = rounds
        self.on_epoch = on_epoch
        self.data_gen = torch.Generator().manual_seed(seed + 1)
        self.step = 0
        self.epoch = 0
        self.best_accuracy = 0.0
        self.envs: list[Env] = []
        """This round's envs (a seam for tests and benchmarks that inject faults)."""
        self.batched = batched_envs(env_exec, env_cfg, runtime)
        """The batched step (``--env-exec batched``); None: each env trains in turn (``Env.train_step``)."""
        self.graphed = graphed_step(self.batched, runtime, batch_size) if cuda_graphs else None
        """The batched step replayed as a CUDA graph where shapes are fixed (``--cuda-graphs on``)."""
        self.should_stop: Callable[[], bool] = lambda: False
        """Asked at the end of every epoch but a round's last: True ends the round there (``RoundStopped``)."""

    # --- the algorithm -------------------------------------------------------------------

    def run_round(self, round_: int) -> RoundResult:
        envs = self.envs = self.fresh_envs(round_)
        self.agent.begin_round(self.n_envs)
        returns = torch.zeros(self.n_envs)
        previous: _Decision | None = None
        for t in range(self.env_cfg.episode_length):
            self.epoch += 1
            self._emit_each(envs, [env.begin_epoch() for env in envs])
            with self.sites.phases.phase(TRAIN):
                self.train_epoch(envs)
            with self.sites.phases.phase(VALIDATION):
                self.validate(envs)
            terminal = t == self.env_cfg.episode_length - 1
            rewards = None
            if previous is not None:
                rewards = self.rewards(envs, previous, terminal)
                self.agent.record_rewards(t - 1, rewards)
                returns += rewards
            previous = None if terminal else self.decide_and_apply(t, envs)
            self.report_epoch(round_, t + 1, envs, rewards, previous)
            if self.on_epoch is not None:
                self.on_epoch(round_, t + 1, [env.val_acc for env in envs])
            if not terminal and self.should_stop():
                raise RoundStopped(round_, t + 1)
        with self.sites.phases.phase(PPO_UPDATE):
            update = self.update(round_, returns)
        return RoundResult(round_, returns.tolist(), [env.val_acc for env in envs],
                           sum(e.fossilized for e in envs), sum(e.pruned for e in envs), update)

    def fresh_envs(self, round_: int) -> list[Env]:
        """New hosts every round, each from its own seed so runs repeat exactly."""
        envs = []
        for i in range(self.n_envs):
            torch.manual_seed(self.seed * 100_003 + round_ * 1_009 + i)
            envs.append(Env(i, round_, self.env_cfg, self.runtime))
        return envs

    def train_epoch(self, envs: list[Env]) -> None:
        data, rt = self.data, self.runtime
        perm = torch.randperm(data.n_train, generator=self.data_gen).to(rt.device, non_blocking=True)
        # One shuffled copy per epoch; each batch is then a view, with no per-batch stream waits.
        xs, ys = data.train_x[perm], data.train_y[perm]
        batched = self.batched
        if batched is not None:
            batched.prepare(envs)  # lifecycle changes regroup the seeds here, between epochs
        else:
            rt.streams_wait_default()
        batches = 0
        for start in range(0, data.n_train, self.batch_size):
            x, y = xs[start: start + self.batch_size], ys[start: start + self.batch_size]
            measure = self.step % self.gradient_stride == 0
            telemetry = self.sites.gradients_due(self.step)
            if batched is not None:
                (self.graphed or batched).train_step(x, y, measure, telemetry, self.sites)
            else:
                for env in envs:
                    with rt.on_env_stream(env.index):
                        env.train_step(x, y, measure, telemetry, self.sites)
            if telemetry:
                self.sites.flush_gradients()
            self.step += 1
            batches += 1
            self.hooks.step_boundary(self.step, self.epoch)
        if batched is not None:
            batched.finish_epoch(envs, batches)
        else:
            rt.default_waits_streams()

    def validate(self, envs: list[Env]) -> None:
        rows = []
        for env in envs:
            with self.runtime.on_env_stream(env.index):
                rows.append(env.validate(self.data.val_x, self.data.val_y)[0])
        self.runtime.default_waits_streams()
        for env, row in zip(envs, torch.stack(rows).cpu().tolist(), strict=True):  # one transfer for all envs
            env.absorb(row)
            env.end_epoch()
            self.best_accuracy = max(self.best_accuracy, env.val_acc)

    def decide_and_apply(self, t: int, envs: list[Env]) -> _Decision:
        potential = torch.tensor([env.potential() for env in envs])
        with self.sites.phases.phase(ROLLOUT):
            view = SlotView(
                stage=torch.tensor([[STAGE_CODE[s.stage] for s in env.slots] for env in envs]),
                age=torch.tensor([[s.age for s in env.slots] for env in envs]),
                pruning=torch.tensor([[s.pruning for s in env.slots] for env in envs]))
            op_mask, slot_mask = compute_masks(view, self.env_cfg.lifecycle.min_prune_age)
            rows = self.agent.act(t, envs, op_mask, slot_mask).tolist()
        with self.sites.phases.phase(ACTION):
            actions = [Action.from_row(row) for row in rows]
            self._emit_each(envs, [env.apply(a) for env, a in zip(envs, actions, strict=True)])
        return _Decision(potential, actions)

    def rewards(self, envs: list[Env], previous: _Decision, terminal: bool) -> torch.Tensor:
        nan = math.nan
        inputs = RewardInputs(
            contributions=torch.tensor([[nan if s.contribution is None else s.contribution for s in env.slots]
                                        for env in envs]),
            blended=torch.tensor([[s.stage in BLENDED_STAGES for s in env.slots] for env in envs]),
            extra_params=torch.tensor([float(env.model.extra_params()) for env in envs]),
            host_params=float(envs[0].model.host_params),
            potential_prev=previous.potential,
            potential_now=torch.tensor([env.potential() for env in envs]),
            op=torch.tensor([int(a.op) for a in previous.actions]),
            action_ok=torch.tensor([env.last_action_ok for env in envs]),
            terminal=terminal,
            accuracy=torch.tensor([env.val_acc for env in envs]),
            fossilized=torch.tensor([[s.stage is SeedStage.FOSSILIZED for s in env.slots] for env in envs]),
            extra_compute=torch.tensor([env.extra_compute() for env in envs]))
        return compute_rewards(inputs, self.reward_cfg).total

    def update(self, round_: int, returns: torch.Tensor) -> PPOMetrics | None:
        self.hooks.update_begin(round_)
        self.sites.update_begin()
        result = self.agent.update(self.sites.policy_backward)
        if result is not None:
            metrics, state = result
            payload = ppo_payload(round_, metrics, float(returns.mean()), max(self.env_cfg.episode_length - 1, 1))
            if self.hooks.level is not TelemetryLevel.OFF:
                self.hooks.emit(payload)
            self.sites.after_update(payload, progress=round_ / self.rounds, lstm_state=state)
        self.hooks.update_end(round_)
        return None if result is None else result[0]

    # --- telemetry -----------------------------------------------------------------------

    def report_epoch(self, round_: int, epoch_in_round: int, envs: list[Env], rewards: torch.Tensor | None,
                     decision: _Decision | None) -> None:
        if self.hooks.level is not TelemetryLevel.OFF:
            reward_list = None if rewards is None else rewards.tolist()
            slot_ids = self.env_cfg.slots
            for e, env in enumerate(envs):
                self.hooks.emit(EpochCompleted(
                    round=round_, accuracy=env.val_acc, val_loss=env.val_loss, train_loss=env.train_loss,
                    reward=None if reward_list is None else reward_list[e],
                    action=None if decision is None else decision.actions[e].describe(slot_ids),
                    seeds=env.snapshot(), host_params=env.model.host_params,
                    fossilized_params=env.fossilized_params()), env=e)
        self.hooks.epoch_end(self.epoch)
        signals = EpochSignals(round_, epoch_in_round, tuple(e.val_acc for e in envs),
                               tuple(e.val_loss for e in envs), tuple(e.train_loss for e in envs),
                               None if decision is None else self.agent.act_signals)
        self.sites.epoch_end(round_, len(envs), signals)

    def _emit_each(self, envs: list[Env], per_env: Iterable[list[AnyPayload]]) -> None:
        for env, events in zip(envs, per_env, strict=True):
            for event in events:
                self.hooks.emit(event, env=env.index)
                if isinstance(event, SeedGerminated):
                    self.sites.forget_scope(env.index, event.slot)


def ppo_payload(round_: int, m: PPOMetrics, episode_return: float, steps: int) -> PPOUpdate:
    return PPOUpdate(round=round_, episode_return=episode_return, mean_reward=episode_return / steps,
                     policy_loss=m.policy_loss, value_loss=m.value_loss, entropy=m.entropy,
                     approx_kl=m.approx_kl, clip_fraction=m.clip_fraction, explained_variance=m.explained_variance,
                     ratio_min=m.ratio_min, ratio_max=m.ratio_max, grad_norm=m.grad_norm,
                     update_epochs=m.update_epochs, early_stopped=m.early_stopped,
                     value_std=m.value_std, return_std=m.return_std, policy_digest=m.policy_digest)
