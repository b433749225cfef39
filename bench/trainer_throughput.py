"""Env-epochs/s of the full Esper loop against a bare supervised loop over the same hosts and data.

The baseline trains the same networks (same hosts, config, batches and optimizer settings;
with ``--live-seeds N`` the same seeds in the same slots) and runs one plain validation pass
per epoch: no policy, no lifecycle, no separate seed optimizers, no counterfactuals, no
telemetry. Both run in this invocation, round by round, so the ratio is measured side by
side: ``ratio`` is the median of the rounds' ratios (``ratio_min``..``ratio_max`` their
spread), ``ratio_cpu`` the median per CPU second of this process, which other load moves less.

``--live-seeds N`` germinates a seed in each of the first N slots of every env when its episode
starts (the policy still decides everything after that): the seeds' cost is on both sides, and
the ratio is what the Esper machinery costs around them.

It also counts the full loop's host syncs per epoch at NORMAL (``nissa.telemetry.syncs``, as
``bench/host_syncs.py`` does), and with ``--device cuda`` what ``torch.cuda.set_sync_debug_mode
("warn")`` reports. CIFAR shape with 3 live seeds:
``--device cuda --train-size 50000 --val-size 10000 --n-envs 4 --batch-size 512 --slots 3
--live-seeds 3 --policy heuristic``.

Last line: ``key=value`` pairs, ``ratio=`` full / bare.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

from leyline import TelemetryLevel
from nissa.telemetry.syncs import CudaSyncCounter
from trainer.build import build_trainer, lifecycle_config
from trainer.data import TaskData, make_synthetic
from trainer.hooks import NullHooks
from trainer.kasmina.host import CNNHost
from trainer.kasmina.model import MorphogeneticModel
from trainer.simic.config import TrainConfig, add_training_args
from trainer.simic.diagnostics import SEED_BLUEPRINTS, RoundSyncs, count_host_syncs, with_live_seeds
from trainer.simic.runtime import resolve_device


def bare_models(config: TrainConfig, device: torch.device, round_: int, live_seeds: int) -> list[nn.Module]:
    """The same networks the full loop trains: each env's host, seeded alike, with the same live
    seeds in their first slots (in TRAINING, as the loop has them from the first epoch on)."""
    models = []
    for i in range(config.n_envs):
        torch.manual_seed(config.seed * 100_003 + round_ * 1_009 + i)
        with device:
            model = MorphogeneticModel(CNNHost(config.host_config), config.ordered_slots, lifecycle_config(config))
        for n, slot in enumerate(model.slots[:live_seeds]):
            slot.germinate(SEED_BLUEPRINTS[n % len(SEED_BLUEPRINTS)], "linear_add", 3, f"bare{n}", device)
            slot.advance()
        models.append(model.to(memory_format=torch.channels_last))
    return models


def bare_round(config: TrainConfig, data: TaskData, device: torch.device, round_: int, live_seeds: int) -> int:
    """One episode of plain supervised training of the same networks for each env (one optimizer,
    one clip, one validation pass an epoch); returns env-epochs done."""
    models = bare_models(config, device, round_, live_seeds)
    opts = [torch.optim.SGD(m.parameters(), lr=config.host_lr, momentum=0.9, weight_decay=5e-4) for m in models]
    gen = torch.Generator().manual_seed(config.seed + 1)
    for _ in range(config.episode_length):
        perm = torch.randperm(data.n_train, generator=gen).to(device)
        xs, ys = data.train_x[perm], data.train_y[perm]
        for start in range(0, data.n_train, config.batch_size):
            x, y = xs[start: start + config.batch_size], ys[start: start + config.batch_size]
            for model, opt in zip(models, opts, strict=True):
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(model(x), y).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0, foreach=True)
                opt.step()
        accs = []
        for model in models:
            model.eval()
            with torch.no_grad():
                accs.append((model(data.val_x).argmax(1) == data.val_y).float().mean())
            model.train()
        torch.stack(accs).cpu()
    return config.n_envs * config.episode_length


def full_round(config: TrainConfig, data: TaskData, round_: int, live_seeds: int) -> int:
    trainer = with_live_seeds(build_trainer(config, NullHooks(TelemetryLevel.NORMAL), data=data), live_seeds)
    trainer.run_round(round_)
    return config.n_envs * config.episode_length


def count_syncs(config: TrainConfig, live_seeds: int, level: TelemetryLevel, cuda: bool = False) -> RoundSyncs:
    """Host syncs of a full round (the second; the first warms up), as ``bench/host_syncs.py`` counts
    them; ``cuda``: what ``torch.cuda.set_sync_debug_mode("warn")`` reports instead. Counted eager: the
    counter watches every tensor call, which a compiled full graph cannot hold, and the loop's reads of the
    device are the same compiled or not."""
    config = dataclasses.replace(config, compile_mode="off")
    return count_host_syncs(lambda hooks: build_trainer(config, hooks), NullHooks(level), resolve_device(config.device),
                            live_seeds=live_seeds, counter=CudaSyncCounter() if cuda else None)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults (``TrainConfig``'s), checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_args(parser)
    parser.add_argument("--repeats", type=int, default=5, help="rounds of each loop, interleaved")
    parser.add_argument("--live-seeds", type=int, default=2, help="seeds germinated at each episode start")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    ns = options(argv)
    config = TrainConfig.from_args(ns)
    if config.cpu_threads > 0:
        torch.set_num_threads(config.cpu_threads)
    device = resolve_device(config.device)
    data = make_synthetic(config.seed, config.train_size, config.val_size).to(device, channels_last=True)
    bare_round(config, data, device, 0, ns.live_seeds)  # warm-up both paths
    full_round(config, data, 0, ns.live_seeds)
    rates: dict[str, list[float]] = {"bare": [], "full": []}
    cpu_rates: dict[str, list[float]] = {"bare": [], "full": []}
    for r in range(1, ns.repeats + 1):
        # Side by side, round by round, in alternating order: a burst of load on a shared machine
        # hits one pair, and the median of the pairs' ratios leaves it out.
        for which in ("bare", "full") if r % 2 else ("full", "bare"):
            t0, c0 = time.perf_counter(), time.process_time()
            done = (bare_round(config, data, device, r, ns.live_seeds) if which == "bare"
                    else full_round(config, data, r, ns.live_seeds))
            rates[which].append(done / (time.perf_counter() - t0))
            cpu_rates[which].append(done / (time.process_time() - c0))
    ratios = sorted(f / b for f, b in zip(rates["full"], rates["bare"], strict=True))
    cpu_ratios = [f / b for f, b in zip(cpu_rates["full"], cpu_rates["bare"], strict=True)]
    bare, full = statistics.median(rates["bare"]), statistics.median(rates["full"])
    fields = {"device": device.type, "policy": config.policy, "n_envs": config.n_envs,
              "train_size": config.train_size, "val_size": config.val_size, "live_seeds": ns.live_seeds,
              "bare_env_epochs_per_s": f"{bare:.2f}", "full_env_epochs_per_s": f"{full:.2f}",
              "ratio": f"{statistics.median(ratios):.3f}", "ratio_min": f"{ratios[0]:.3f}",
              "ratio_max": f"{ratios[-1]:.3f}", "ratio_cpu": f"{statistics.median(cpu_ratios):.3f}"}
    syncs = count_syncs(config, ns.live_seeds, TelemetryLevel.NORMAL)
    fields["syncs_per_epoch_normal"] = f"{syncs.per_epoch:.2f}"
    fields["syncs_per_update_normal"] = syncs.update
    if device.type == "cuda":
        cuda = count_syncs(config, ns.live_seeds, TelemetryLevel.NORMAL, cuda=True)
        fields["cuda_syncs_per_epoch_normal"] = f"{cuda.per_epoch:.2f}"
        fields["cuda_syncs_per_update_normal"] = cuda.update
    print(f"bare {bare:.2f} env-epochs/s, full loop {full:.2f} env-epochs/s", file=sys.stderr)
    print(" ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
