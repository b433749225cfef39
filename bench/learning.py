"""Does Esper grow useful capacity, and does PPO learn to grow it? Three policies per seed, side by side.

For each seed (its own task data, hosts and policy), every policy trains the same hosts: a round's
hosts come from the seed and the round number, and each policy shuffles a round's data the same way.

- no-seed: the host alone (a policy that only ever WAITs), on the rounds of PPO's first and last
  windows;
- heuristic Tamiyo, on the rounds of PPO's last window;
- PPO, learning over ``--rounds`` rounds from scratch.

An episode's accuracy is its final validation accuracy; a gain is in accuracy points (pp) over the
no-seed host on the same rounds, at equal epochs. The parameter cost is what the fossilized seeds
add to the host, in % of its parameters, and the gain per 1% of it. Last line: ``key=value`` pairs;
``heuristic_gain_pp`` is the mean over seeds of the heuristic's gain, ``ppo_vs_heuristic`` is PPO's
gain in its last window over the heuristic's gain (both means over seeds; 1.0: as good).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Sequence

import torch

from leyline import TelemetryLevel
from trainer.data import make_synthetic
from trainer.hooks import NullHooks
from trainer.simic.agent import HeuristicAgent
from trainer.simic.config import TrainConfig, add_training_args
from trainer.build import build_trainer
from trainer.simic.vectorized import VectorizedTrainer
from trainer.tamiyo.actions import Action, Op
from trainer.tamiyo.features import EnvSignals


class WaitPolicy:
    """The no-seed baseline: never germinates anything."""

    def act(self, envs: Sequence[EnvSignals], op_mask: torch.Tensor, slot_mask: torch.Tensor) -> torch.Tensor:
        return torch.tensor([Action.row(Op.WAIT) for _ in envs], dtype=torch.long)


@dataclasses.dataclass(frozen=True)
class Episode:
    """One env's episode of one round."""

    accuracy: float
    episode_return: float
    fossilized: int
    added_pct: float
    """Parameters of the fossilized seeds, in % of the host's."""


@dataclasses.dataclass(frozen=True)
class Round:
    episodes: list[Episode]
    kl: float | None = None
    clip_fraction: float | None = None


def play(trainer: VectorizedTrainer, rounds: Sequence[int], seed: int, label: str) -> dict[int, Round]:
    """Run ``rounds`` (by number: their hosts and data order are fixed by it) and keep each episode."""
    out: dict[int, Round] = {}
    for r in rounds:
        trainer.data_gen.manual_seed(seed * 7919 + r)  # every policy sees round r's data in one order
        result = trainer.run_round(r)
        episodes = []
        for env, acc, ret in zip(trainer.envs, result.final_accuracy, result.episode_return):
            added = 100.0 * env.fossilized_params() / env.model.host_params
            episodes.append(Episode(acc, ret, env.fossilized, added))
        ppo = result.ppo
        out[r] = Round(episodes, None if ppo is None else ppo.approx_kl, None if ppo is None else ppo.clip_fraction)
        update = "" if ppo is None else (f" kl {ppo.approx_kl:.4f} clip {ppo.clip_fraction:.3f} "
                                         f"epochs {ppo.update_epochs} ev {_num(ppo.explained_variance)}")
        print(f"  seed {seed} {label} round {r}: acc {_mean(e.accuracy for e in episodes):.3f} "
              f"return {_mean(e.episode_return for e in episodes):+.2f} fossilized {result.fossilized} "
              f"pruned {result.pruned}{update}", file=sys.stderr, flush=True)
    return out


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f}"


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / max(len(xs), 1)


def _episodes(rounds: dict[int, Round], which: Sequence[int]) -> list[Episode]:
    return [e for r in which for e in rounds[r].episodes]


@dataclasses.dataclass(frozen=True)
class SeedResult:
    no_seed_first: float
    no_seed_last: float
    heuristic: float
    heuristic_fossil_rate: float
    heuristic_added_pct: float
    ppo_first: float
    ppo_last: float
    ppo_return_first: float
    ppo_return_last: float
    ppo_fossil_rate_last: float
    ppo_kl: float
    ppo_clip: float

    @property
    def heuristic_gain(self) -> float:
        return 100 * (self.heuristic - self.no_seed_last)

    @property
    def ppo_gain_first(self) -> float:
        return 100 * (self.ppo_first - self.no_seed_first)

    @property
    def ppo_gain_last(self) -> float:
        return 100 * (self.ppo_last - self.no_seed_last)

    @property
    def ppo_learned(self) -> bool:
        """PPO's last window beats its first on accuracy gain and on return."""
        return self.ppo_gain_last > self.ppo_gain_first and self.ppo_return_last > self.ppo_return_first


def measure_seed(base: TrainConfig, seed: int, window: int) -> SeedResult:
    config = dataclasses.replace(base, seed=seed)
    data = make_synthetic(seed, config.train_size, config.val_size)
    first, last = list(range(1, window + 1)), list(range(config.rounds - window + 1, config.rounds + 1))
    hooks = NullHooks(TelemetryLevel.OFF)
    ppo = play(build_trainer(dataclasses.replace(config, policy="ppo"), hooks, data=data),
               range(1, config.rounds + 1), seed, "ppo")
    waiting = build_trainer(dataclasses.replace(config, policy="heuristic"), hooks, data=data)
    waiting.agent = HeuristicAgent(WaitPolicy())  # type: ignore[arg-type]
    no_seed = play(waiting, first + last, seed, "no-seed")
    heuristic = play(build_trainer(dataclasses.replace(config, policy="heuristic"), hooks, data=data), last,
                     seed, "heuristic")
    heur = _episodes(heuristic, last)
    updates = list(ppo.values())
    return SeedResult(
        no_seed_first=_mean(e.accuracy for e in _episodes(no_seed, first)),
        no_seed_last=_mean(e.accuracy for e in _episodes(no_seed, last)),
        heuristic=_mean(e.accuracy for e in heur),
        heuristic_fossil_rate=_mean(e.fossilized > 0 for e in heur),
        heuristic_added_pct=_mean(e.added_pct for e in heur),
        ppo_first=_mean(e.accuracy for e in _episodes(ppo, first)),
        ppo_last=_mean(e.accuracy for e in _episodes(ppo, last)),
        ppo_return_first=_mean(e.episode_return for e in _episodes(ppo, first)),
        ppo_return_last=_mean(e.episode_return for e in _episodes(ppo, last)),
        ppo_fossil_rate_last=_mean(e.fossilized > 0 for e in _episodes(ppo, last)),
        ppo_kl=_mean(u.kl for u in updates if u.kl is not None),
        ppo_clip=_mean(u.clip_fraction for u in updates if u.clip_fraction is not None))


def _spread(xs: list[float]) -> str:
    return f"{statistics.mean(xs):+.2f} ± {statistics.pstdev(xs):.2f}"


def report(results: list[SeedResult], config: TrainConfig, window: int, wall: float) -> None:
    for i, s in enumerate(results):
        print(f"seed {i}: no-seed {s.no_seed_last:.3f} | heuristic {s.heuristic:.3f} ({s.heuristic_gain:+.1f} pp; "
              f"fossilized in {s.heuristic_fossil_rate:.0%} of episodes; +{s.heuristic_added_pct:.0f}% params) | "
              f"PPO {s.ppo_first:.3f} ({s.ppo_gain_first:+.1f} pp) -> {s.ppo_last:.3f} ({s.ppo_gain_last:+.1f} pp), "
              f"return {s.ppo_return_first:.2f} -> {s.ppo_return_last:.2f}, KL {s.ppo_kl:.4f}, clip {s.ppo_clip:.3f}")
    heur_gain = statistics.mean(s.heuristic_gain for s in results)
    added = statistics.mean(s.heuristic_added_pct for s in results)
    ppo_last = statistics.mean(s.ppo_gain_last for s in results)
    print(f"over {len(results)} seeds (mean ± std): heuristic gain {_spread([s.heuristic_gain for s in results])} pp; "
          f"PPO gain first {_spread([s.ppo_gain_first for s in results])} pp, last "
          f"{_spread([s.ppo_gain_last for s in results])} pp; PPO return first "
          f"{_spread([s.ppo_return_first for s in results])}, last {_spread([s.ppo_return_last for s in results])}")
    fields = {
        "seeds": len(results), "rounds": config.rounds, "window": window, "n_envs": config.n_envs,
        "episode_length": config.episode_length,
        "no_seed_acc": f"{statistics.mean(s.no_seed_last for s in results):.4f}",
        "heuristic_acc": f"{statistics.mean(s.heuristic for s in results):.4f}",
        "heuristic_gain_pp": f"{heur_gain:.2f}",
        "heuristic_gain_min_pp": f"{min(s.heuristic_gain for s in results):.2f}",
        "heuristic_fossil_rate": f"{statistics.mean(s.heuristic_fossil_rate for s in results):.2f}",
        "added_params_pct": f"{added:.1f}",
        "pp_per_pct_params": f"{heur_gain / added:.3f}" if added > 0 else "nan",
        "ppo_gain_first_pp": f"{statistics.mean(s.ppo_gain_first for s in results):.2f}",
        "ppo_gain_last_pp": f"{ppo_last:.2f}",
        "ppo_return_first": f"{statistics.mean(s.ppo_return_first for s in results):.3f}",
        "ppo_return_last": f"{statistics.mean(s.ppo_return_last for s in results):.3f}",
        "ppo_learned_seeds": sum(s.ppo_learned for s in results),
        "ppo_fossil_rate_last": f"{statistics.mean(s.ppo_fossil_rate_last for s in results):.2f}",
        "ppo_kl": f"{statistics.mean(s.ppo_kl for s in results):.4f}",
        "ppo_clip_fraction": f"{statistics.mean(s.ppo_clip for s in results):.3f}",
        "ppo_vs_heuristic": f"{ppo_last / heur_gain:.3f}" if heur_gain else "nan",
        "wall_s": f"{wall:.0f}",
    }
    print(" ".join(f"{k}={v}" for k, v in fields.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_args(parser)
    parser.add_argument("--seeds", type=int, default=3, help="seeds (task data, hosts, policy), each measured apart")
    parser.add_argument("--window", type=int, default=3, help="rounds at each end of the PPO run that are compared")
    ns = parser.parse_args()
    if ns.rounds is None:
        ns.rounds = 12
    base = dataclasses.replace(TrainConfig.from_args(ns), device="cpu", log_every=0)
    if ns.seeds < 1 or ns.window < 1 or base.rounds < 2 * ns.window:
        parser.error(f"need --seeds >= 1, --window >= 1 and --rounds >= 2 × --window ({2 * ns.window})")
    torch.set_num_threads(max(base.cpu_threads, 1))
    t0 = time.perf_counter()
    results = [measure_seed(base, seed, ns.window) for seed in range(ns.seeds)]
    report(results, base, ns.window, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
