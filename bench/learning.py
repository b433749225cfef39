"""Does the loop learn? Two measurements on the built-in synthetic task, in one invocation.

1. PPO: mean raw episode return (per env) over the first ``--window`` rounds against the last
   ``--window`` rounds of one run; also the same figure without the terminal accuracy bonus
   (``ppo_shaped_*``), the part of the return that the policy's own actions decide: the bonus
   mostly tracks how well each round's fresh host happens to train.
2. Heuristic Tamiyo: mean final validation accuracy per round, against a no-seed baseline that
   trains the same hosts in the same loop with a policy that only ever WAITs.

Last line: ``key=value`` pairs; ``ratio=`` is heuristic accuracy / no-seed accuracy.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence

import torch

from leyline import TelemetryLevel
from trainer.data import make_synthetic
from trainer.hooks import NullHooks
from trainer.simic.agent import HeuristicAgent
from trainer.simic.config import TrainConfig, add_training_args
from trainer.simic.reward import RewardConfig
from trainer.simic.run import build_trainer
from trainer.simic.vectorized import RoundResult
from trainer.tamiyo.actions import Action, Op
from trainer.tamiyo.features import EnvSignals


class WaitPolicy:
    """The no-seed baseline: never germinates anything."""

    def act(self, envs: Sequence[EnvSignals], op_mask: torch.Tensor, slot_mask: torch.Tensor) -> torch.Tensor:
        return torch.tensor([Action.row(Op.WAIT) for _ in envs], dtype=torch.long)


def run(config: TrainConfig, data, baseline: bool = False) -> list[RoundResult]:
    trainer = build_trainer(config, NullHooks(TelemetryLevel.OFF), data=data)
    if baseline:
        trainer.agent = HeuristicAgent(WaitPolicy())  # type: ignore[arg-type]
    results = []
    for r in range(1, config.rounds + 1):
        results.append(trainer.run_round(r))
        print(f"  {config.policy}{' (no seeds)' if baseline else ''} round {r}: "
              f"return {_mean(results[-1].episode_return):+.2f} acc {_mean(results[-1].final_accuracy):.3f}",
              file=sys.stderr, flush=True)
    return results


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / max(len(xs), 1)


def _shaped(result: RoundResult) -> float:
    """Mean episode return per env less the terminal accuracy bonus."""
    bonus = RewardConfig().terminal_weight
    return _mean([ret - bonus * acc for ret, acc in zip(result.episode_return, result.final_accuracy)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_args(parser)
    parser.add_argument("--window", type=int, default=4, help="rounds averaged at each end of the PPO run")
    parser.add_argument("--heuristic-rounds", type=int, default=3, help="rounds of the heuristic and of the baseline")
    parser.add_argument("--parts", default="ppo,heuristic", help="which measurements: ppo, heuristic or both")
    ns = parser.parse_args()
    if ns.rounds is None:
        ns.rounds = 24
    config = TrainConfig.from_args(ns)
    if config.rounds < 2 * ns.window:
        parser.error(f"--rounds must be at least 2 × --window ({2 * ns.window})")
    torch.set_num_threads(max(config.cpu_threads, 1))
    data = make_synthetic(config.seed, config.train_size, config.val_size)
    parts = set(ns.parts.split(","))
    t0 = time.perf_counter()
    fields: dict[str, object] = {"n_envs": config.n_envs, "episode_length": config.episode_length}
    if "ppo" in parts:
        ppo = run(dataclasses.replace(config, policy="ppo"), data)
        first = _mean([_mean(r.episode_return) for r in ppo[: ns.window]])
        last = _mean([_mean(r.episode_return) for r in ppo[-ns.window:]])
        shaped_first = _mean([_shaped(r) for r in ppo[: ns.window]])
        shaped_last = _mean([_shaped(r) for r in ppo[-ns.window:]])
        fields.update({"ppo_rounds": config.rounds, "window": ns.window, "ppo_return_first": f"{first:.3f}",
                       "ppo_return_last": f"{last:.3f}", "ppo_return_gain": f"{last - first:+.3f}",
                       "ppo_shaped_first": f"{shaped_first:.3f}", "ppo_shaped_last": f"{shaped_last:.3f}",
                       "ppo_shaped_gain": f"{shaped_last - shaped_first:+.3f}"})
    if "heuristic" in parts:
        short = dataclasses.replace(config, rounds=ns.heuristic_rounds)
        heur = run(dataclasses.replace(short, policy="heuristic"), data)
        base = run(dataclasses.replace(short, policy="heuristic"), data, baseline=True)
        heur_acc = _mean([_mean(r.final_accuracy) for r in heur])
        base_acc = _mean([_mean(r.final_accuracy) for r in base])
        fields.update({"heuristic_rounds": ns.heuristic_rounds, "heuristic_acc": f"{heur_acc:.4f}",
                       "no_seed_acc": f"{base_acc:.4f}", "fossilized": sum(r.fossilized for r in heur),
                       "ratio": f"{heur_acc / base_acc:.3f}"})
    fields["wall_s"] = f"{time.perf_counter() - t0:.0f}"
    print(" ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
