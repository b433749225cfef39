"""Does growing pay? Esper's grown networks against the controls a reviewer asks for, paired per episode.

For each seed (its own task data), every condition trains the same hosts: round r's env e starts
from a host seeded by (seed, r, e) and sees round r's data in one order, in every condition. The
conditions, on the last ``--window`` rounds (the measured episodes):

- ``alone``: the host alone (a policy that only waits); also on the first window, for PPO's start;
- ``heuristic``: heuristic Tamiyo, having played every round before (it learns which blueprints help);
- ``ppo``: PPO, learning over ``--rounds`` rounds from scratch;
- ``random``: a policy uniform over whatever the action masks allow;
- ``static``: a host widened to the heuristic's grown networks' mean parameter count, alone;
- ``scratch``: the heuristic's final grown architecture of the same episode, present from epoch 0.

Decisions read the validation split; every accuracy below is on a test split that no decision
sees. Parameters count the host and every seed attached at the episode's end (training, blending,
holding or fossilized). Training FLOPs are counted by ``FlopCounterMode`` on one forward and
backward per architecture, times the images trained in it. Differences are paired per episode
(seed, round, env), with the sample SD and a 95% CI (t distribution).

Last line: ``key=value`` pairs, among them ``heuristic_gain_pp`` (over the host alone),
``gain_vs_static_matched_pp``, ``gain_vs_from_scratch_pp``, ``acc_per_tflop_ratio_vs_static``
(the grown network's test accuracy per training TFLOP over the static host's), ``ppo_vs_heuristic``
(PPO's gain in its last window over the heuristic's) and ``goal_met``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import statistics
import sys
import time

import torch
from controls import (  # a sibling script module
    Arch,
    FlopMeter,
    RandomPolicy,
    WaitPolicy,
    graft_each_round,
    grown_arch,
    host_params,
    paired,
    widened,
)

from leyline import TelemetryLevel
from trainer.build import build_trainer
from trainer.data import TaskData, make_synthetic
from trainer.hooks import NullHooks
from trainer.simic.agent import HeuristicAgent
from trainer.simic.config import TrainConfig, add_training_args
from trainer.simic.vectorized import VectorizedTrainer

Key = tuple[int, int, int]
"""(seed, round, env): one episode, the unit every comparison is paired on."""


@dataclasses.dataclass(frozen=True)
class Episode:
    test_acc: float
    val_acc: float
    params: int
    """Host plus every attached seed."""
    tflops: float
    """Training FLOPs of the episode, in TFLOPs."""
    fossilized: int
    pruned: int
    arch: Arch


@dataclasses.dataclass
class Task:
    seed: int
    data: TaskData
    test_x: torch.Tensor
    test_y: torch.Tensor


def make_task(seed: int, config: TrainConfig, test_size: int) -> Task:
    """The synthetic task with a third split: validation for the decisions, test for the figures."""
    full = make_synthetic(seed, config.train_size, config.val_size + test_size)
    n = config.val_size
    data = TaskData(full.name, full.train_x, full.train_y, full.val_x[:n], full.val_y[:n])
    test_x = full.val_x[n:].to(memory_format=torch.channels_last)
    return Task(seed, data, test_x, full.val_y[n:])


@torch.no_grad()
def test_accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    was = model.training
    model.eval()
    acc = float((model(x).argmax(-1) == y).float().mean())
    model.train(was)
    return acc


def play(trainer: VectorizedTrainer, task: Task, rounds: list[int], label: str) -> dict[Key, Episode]:
    """Run ``rounds`` (by number: their hosts and data order are fixed by it); keep each episode."""
    meter = FlopMeter(task.data.train_x[: trainer.batch_size], task.data.train_y[: trainer.batch_size])
    meter.attach(trainer)
    out: dict[Key, Episode] = {}
    for r in rounds:
        trainer.data_gen.manual_seed(task.seed * 7919 + r)  # every condition sees round r's data in one order
        result = trainer.run_round(r)
        for env, val in zip(trainer.envs, result.final_accuracy, strict=True):
            out[(task.seed, r, env.index)] = Episode(
                test_accuracy(env.model, task.test_x, task.test_y), val,
                env.model.host_params + env.model.extra_params(), meter.totals[(r, env.index)] / 1e12,
                env.fossilized, env.pruned, grown_arch(env))
        mean = statistics.fmean(out[(task.seed, r, e)].test_acc for e in range(trainer.n_envs))
        update = "" if result.ppo is None else f" kl {result.ppo.approx_kl:.4f}"
        print(f"  seed {task.seed} {label} round {r}: test acc {mean:.3f} fossilized {result.fossilized} "
              f"pruned {result.pruned}{update}", file=sys.stderr, flush=True)
    return out


def _trainer(config: TrainConfig, task: Task, policy: str, agent: object | None = None) -> VectorizedTrainer:
    trainer = build_trainer(dataclasses.replace(config, policy=policy), NullHooks(TelemetryLevel.OFF), data=task.data)
    if agent is not None:
        trainer.agent = HeuristicAgent(agent)  # type: ignore[arg-type]
    return trainer


def measure_seed(base: TrainConfig, seed: int, window: int, test_size: int) -> dict[str, dict[Key, Episode]]:
    config = dataclasses.replace(base, seed=seed)
    task = make_task(seed, config, test_size)
    every = list(range(1, config.rounds + 1))
    first, last = every[:window], every[-window:]
    got: dict[str, dict[Key, Episode]] = {}
    got["ppo"] = play(_trainer(config, task, "ppo"), task, every, "ppo")
    got["alone"] = play(_trainer(config, task, "heuristic", WaitPolicy()), task, first + last, "alone")
    heuristic = play(_trainer(config, task, "heuristic"), task, every, "heuristic")
    got["heuristic"] = {k: e for k, e in heuristic.items() if k[1] in last}
    got["random"] = play(_trainer(config, task, "heuristic", RandomPolicy(seed)), task, last, "random")
    target = round(statistics.fmean(e.params for e in got["heuristic"].values()))
    static = _trainer(config, task, "heuristic", WaitPolicy())
    static.env_cfg = dataclasses.replace(static.env_cfg, host=widened(config.host_config, target))
    got["static"] = play(static, task, last, f"static {static.env_cfg.host.widths}")
    scratch = _trainer(config, task, "heuristic", WaitPolicy())
    graft_each_round(scratch, {(r, e): ep.arch for (_, r, e), ep in got["heuristic"].items()})
    got["scratch"] = play(scratch, task, last, "scratch")
    got["ppo_first"] = {k: e for k, e in got["ppo"].items() if k[1] in first}
    got["ppo"] = {k: e for k, e in got["ppo"].items() if k[1] in last}
    return got


def _acc(e: Episode) -> float:
    return e.test_acc


def report(runs: dict[str, dict[Key, Episode]], config: TrainConfig, seeds: int, window: int, wall: float) -> None:
    last = config.rounds - window + 1
    alone = {k: e for k, e in runs["alone"].items() if k[1] >= last}
    alone_first = {k: e for k, e in runs["alone"].items() if k[1] < last}
    host = host_params(config.host_config)
    print(f"{'condition':<11}{'test acc':>9}{'params':>9}{'% host':>8}{'TFLOPs':>8}{'acc/TFLOP':>10}"
          f"{'fossil':>7}  vs host alone, pp")
    for name in ("alone", "heuristic", "ppo", "random", "static", "scratch"):
        eps = runs[name] if name != "alone" else alone
        acc = statistics.fmean(e.test_acc for e in eps.values())
        params = statistics.fmean(e.params for e in eps.values())
        tflops = statistics.fmean(e.tflops for e in eps.values())
        fossil = statistics.fmean(e.fossilized > 0 for e in eps.values())
        gain = "" if name == "alone" else paired(eps, alone, _acc).show(100)
        print(f"{name:<11}{acc:>9.4f}{params:>9.0f}{100 * (params / host - 1):>+7.1f}%{tflops:>8.4f}"
              f"{acc / tflops:>10.2f}{fossil:>7.0%}  {gain}")
    heur, static, scratch = runs["heuristic"], runs["static"], runs["scratch"]
    gain = paired(heur, alone, _acc)
    vs_static, vs_scratch = paired(heur, static, _acc), paired(heur, scratch, _acc)
    static_gain = paired(static, alone, _acc)
    ppo_gain, ppo_first = paired(runs["ppo"], alone, _acc), paired(runs["ppo_first"], alone_first, _acc)
    random_gain = paired(runs["random"], alone, _acc)

    def mean(eps: dict[Key, Episode], f) -> float:
        return statistics.fmean(f(e) for e in eps.values())
    per_tflop = {n: mean(runs[n], _acc) / mean(runs[n], lambda e: e.tflops) for n in ("heuristic", "static")}
    flops_ratio = mean(heur, lambda e: e.tflops) / mean(static, lambda e: e.tflops)
    print(f"grown (heuristic) − static widened host: {vs_static.show(100, ' pp')}")
    print(f"grown (heuristic) − its architecture from scratch: {vs_scratch.show(100, ' pp')}")
    print(f"grown training FLOPs / static's: {flops_ratio:.3f}; PPO first window {ppo_first.show(100, ' pp')}")
    goal = vs_static.high >= 0 and flops_ratio <= 0.8 and gain.low > 0
    fields = {
        "seeds": seeds, "rounds": config.rounds, "window": window, "n_envs": config.n_envs,
        "episodes": gain.n, "episode_length": config.episode_length,
        "alone_acc": f"{mean(alone, _acc):.4f}", "heuristic_acc": f"{mean(heur, _acc):.4f}",
        "static_acc": f"{mean(static, _acc):.4f}", "scratch_acc": f"{mean(scratch, _acc):.4f}",
        "heuristic_gain_pp": f"{100 * gain.mean:.2f}", "heuristic_gain_ci_pp": f"{100 * gain.half:.2f}",
        "static_gain_pp": f"{100 * static_gain.mean:.2f}", "random_gain_pp": f"{100 * random_gain.mean:.2f}",
        "gain_vs_static_matched_pp": f"{100 * vs_static.mean:.2f}",
        "gain_vs_static_matched_ci_pp": f"{100 * vs_static.half:.2f}",
        "gain_vs_from_scratch_pp": f"{100 * vs_scratch.mean:.2f}",
        "gain_vs_from_scratch_ci_pp": f"{100 * vs_scratch.half:.2f}",
        "added_params_pct": f"{100 * (mean(heur, lambda e: e.params) / host - 1):.1f}",
        "static_added_params_pct": f"{100 * (mean(static, lambda e: e.params) / host - 1):.1f}",
        "flops_ratio_vs_static": f"{flops_ratio:.3f}",
        "acc_per_tflop_ratio_vs_static": f"{per_tflop['heuristic'] / per_tflop['static']:.3f}",
        "heuristic_fossil_rate": f"{mean(heur, lambda e: e.fossilized > 0):.2f}",
        "ppo_gain_first_pp": f"{100 * ppo_first.mean:.2f}", "ppo_gain_last_pp": f"{100 * ppo_gain.mean:.2f}",
        "ppo_gain_last_ci_pp": f"{100 * ppo_gain.half:.2f}",
        "ppo_fossil_rate_last": f"{mean(runs['ppo'], lambda e: e.fossilized > 0):.2f}",
        "ppo_vs_heuristic": f"{ppo_gain.mean / gain.mean:.3f}" if gain.mean else "nan",
        "goal_met": int(goal), "wall_s": f"{wall:.0f}",
    }
    print(" ".join(f"{k}={v}" for k, v in fields.items()))


def save(path: pathlib.Path, runs: dict[str, dict[Key, Episode]]) -> None:
    rows = [[name, list(key), dataclasses.asdict(e)] for name, eps in runs.items() for key, e in eps.items()]
    path.write_text(json.dumps(rows))


def load(paths: list[pathlib.Path]) -> dict[str, dict[Key, Episode]]:
    runs: dict[str, dict[Key, Episode]] = {}
    for path in paths:
        for name, key, e in json.loads(path.read_text()):
            arch = tuple(tuple(seed) for seed in e.pop("arch"))
            runs.setdefault(name, {})[tuple(key)] = Episode(**e, arch=arch)  # type: ignore[index]
    return runs


DEFAULTS = TrainConfig(rounds=12, device="cpu", log_every=0)
"""The runs this benchmark compares unless told otherwise: twelve rounds, on the CPU, quiet."""


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults (``DEFAULTS``), checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_args(parser, DEFAULTS)
    parser.add_argument("--seeds", type=int, default=3, help="seeds (task data, hosts, policies), each measured apart")
    parser.add_argument("--first-seed", type=int, default=0, help="the first of the --seeds seeds")
    parser.add_argument("--window", type=int, default=3, help="rounds at each end of the run that are compared")
    parser.add_argument("--test-size", type=int, default=1024, help="test images no decision sees")
    parser.add_argument("--save", type=pathlib.Path, help="also write every episode to this JSON file")
    parser.add_argument("--load", type=pathlib.Path, nargs="+",
                        help="report on episodes saved by earlier invocations (seeds run apart) instead of running")
    ns = parser.parse_args(argv)
    if ns.seeds < 1 or ns.window < 1 or ns.rounds < 2 * ns.window or ns.test_size < 1:
        parser.error(f"need --seeds, --window, --test-size >= 1 and --rounds >= 2 × --window ({2 * ns.window})")
    return ns


def main(argv: list[str] | None = None) -> None:
    ns = options(argv)
    base = TrainConfig.from_args(ns)
    if ns.load:
        runs = load(ns.load)
        report(runs, base, len({k[0] for k in runs["heuristic"]}), ns.window, 0.0)
        return
    torch.set_num_threads(max(base.cpu_threads, 1))
    t0 = time.perf_counter()
    runs: dict[str, dict[Key, Episode]] = {}
    for seed in range(ns.first_seed, ns.first_seed + ns.seeds):
        got = measure_seed(base, seed, ns.window, ns.test_size)
        for name, episodes in got.items():
            runs.setdefault(name, {}).update(episodes)
        print(f"seed {seed} test accuracy: " + ", ".join(
            f"{name} {statistics.fmean(e.test_acc for e in eps.values()):.4f}" for name, eps in got.items()),
            file=sys.stderr, flush=True)
        if ns.save:
            save(ns.save, runs)
    report(runs, base, ns.seeds, ns.window, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
