"""What a sweep may set in an Esper run, from ``run.config`` (a sweep's trial's values arrive there), and which of
those change live (``run.on_hparams``: a sweep's explore, or a person's ``hparams`` command):

- ``ppo.lr``: the policy optimizer's learning rate (live: its param groups);
- ``ppo.entropy_coef``, ``ppo.clip``: the next PPO update's (live);
- ``heuristic.plateau_delta``, ``heuristic.z``, ``heuristic.hold_epochs``, ``heuristic.explore``: the heuristic
  policy's thresholds (live: its next decision);
- ``host_lr``, ``seed_lr``: the hosts' and seeds' SGD rates (at the start only: each round's fresh hosts take the
  run's config, which a live change does not rebuild).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from trainer.simic.agent import Agent, HeuristicAgent, PPOAgent
from trainer.simic.config import TrainConfig

logger = logging.getLogger(__name__)

PPO_LIVE = ("lr", "entropy_coef", "clip")
HEURISTIC_LIVE = ("plateau_delta", "z", "hold_epochs", "explore")
AT_START = ("host_lr", "seed_lr")
LIVE: tuple[str, ...] = (*(f"ppo.{k}" for k in PPO_LIVE), *(f"heuristic.{k}" for k in HEURISTIC_LIVE))
SWEEPABLE: tuple[str, ...] = (*LIVE, *AT_START)
"""Every key of ``run.config`` an Esper run takes from a sweep."""


def with_values(config: TrainConfig, values: Mapping[str, Any]) -> TrainConfig:
    """``config`` with the PPO fields and start-only rates that ``values`` (a run's config) sets; a value of the
    wrong kind is a ``ValueError`` naming its key."""
    ppo: dict[str, Any] = {k: _number(f"ppo.{k}", values[f"ppo.{k}"]) for k in PPO_LIVE if f"ppo.{k}" in values}
    rates: dict[str, Any] = {k: _number(k, values[k]) for k in AT_START if k in values}
    if not ppo and not rates:
        return config
    return dataclasses.replace(config, ppo=dataclasses.replace(config.ppo, **ppo), **rates)


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"run.config[{key!r}]: a number, got {value!r}")
    return float(value)


class LiveValues:
    """Applies live values to the run's agent once it exists (those that came before wait for it)."""

    def __init__(self, start: Mapping[str, Any] | None = None) -> None:
        self._agent: Agent | None = None
        self._pending: dict[str, Any] = {k: v for k, v in (start or {}).items() if k.startswith("heuristic.")}

    def bind(self, agent: Agent) -> None:
        """The run's agent is built: what waited is applied."""
        self._agent = agent
        if self._pending:
            self.apply(self._pending)
            self._pending = {}

    def apply(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Apply ``values`` (an ``hparams`` command's); returns what took effect. A key that is not live, or a
        value out of its range, is a ``ValueError`` (the command is failed with it)."""
        unknown = sorted(set(values) - set(LIVE))
        if unknown:
            raise ValueError(f"not settable live in an Esper run: {', '.join(unknown)} (live: {', '.join(LIVE)})")
        if self._agent is None:
            self._pending.update(values)
            return dict(values)
        return _apply(self._agent, values)


def _apply(agent: Agent, values: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(agent, PPOAgent):
        ppo: dict[str, Any] = {k.removeprefix("ppo."): _number(k, v) for k, v in values.items() if k.startswith("ppo.")}
        agent.cfg = dataclasses.replace(agent.cfg, **ppo)  # checked by PPOConfig's own rules
        if "lr" in ppo:
            for group in agent.optimizer.param_groups:
                group["lr"] = ppo["lr"]
        return {f"ppo.{k}": v for k, v in ppo.items()}
    if isinstance(agent, HeuristicAgent):
        rules = {k.removeprefix("heuristic."): v for k, v in values.items() if k.startswith("heuristic.")}
        if "hold_epochs" in rules:
            rules["hold_epochs"] = int(rules["hold_epochs"])
        agent.policy.config = dataclasses.replace(agent.policy.config, **rules)
        return {f"heuristic.{k}": v for k, v in rules.items()}
    return {}
