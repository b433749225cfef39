"""Env-epochs/s of the full Esper loop against a bare supervised loop over the same hosts and data.

The baseline trains the same CNN hosts (same config, batches and optimizer) and runs one plain
validation pass per epoch: no policy, no seed management, no counterfactuals, no telemetry.
Both run in this invocation, interleaved, so the ratio is measured side by side.

``--live-seeds N`` germinates a seed in each of the first N slots of every env when its episode
starts (the policy still decides everything after that), so seed cost is part of the figure.

It also counts the full loop's host syncs per epoch at NORMAL (``trainer.telemetry.syncs``, as
``bench/host_syncs.py`` does), and with ``--device cuda`` what ``torch.cuda.set_sync_debug_mode
("warn")`` reports. CIFAR shape with 3 live seeds:
``--device cuda --train-size 50000 --val-size 10000 --n-envs 4 --batch-size 512 --slots 3
--live-seeds 3 --policy heuristic``.

Last line: ``key=value`` pairs, ``ratio=`` full / bare.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn.functional as F

from leyline import TelemetryLevel
from trainer.data import TaskData, make_synthetic
from trainer.hooks import NullHooks
from trainer.kasmina.host import CNNHost
from trainer.simic.config import TrainConfig, add_training_args
from trainer.simic.run import build_trainer
from trainer.simic.diagnostics import RoundSyncs, count_host_syncs, with_live_seeds
from trainer.simic.runtime import resolve_device
from trainer.telemetry.syncs import CudaSyncCounter


def bare_round(config: TrainConfig, data: TaskData, device: torch.device, round_: int) -> int:
    """One episode of plain supervised training for each env; returns env-epochs done."""
    hosts = []
    for i in range(config.n_envs):
        torch.manual_seed(config.seed * 100_003 + round_ * 1_009 + i)
        hosts.append(CNNHost(config.host_config).to(device, memory_format=torch.channels_last))
    opts = [torch.optim.SGD(h.parameters(), lr=config.host_lr, momentum=0.9, weight_decay=5e-4) for h in hosts]
    gen = torch.Generator().manual_seed(config.seed + 1)
    for _ in range(config.episode_length):
        perm = torch.randperm(data.n_train, generator=gen).to(device)
        xs, ys = data.train_x[perm], data.train_y[perm]
        for start in range(0, data.n_train, config.batch_size):
            x, y = xs[start: start + config.batch_size], ys[start: start + config.batch_size]
            for host, opt in zip(hosts, opts):
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(host(x), y).backward()
                torch.nn.utils.clip_grad_norm_(host.parameters(), 5.0, foreach=True)
                opt.step()
        accs = []
        for host in hosts:
            host.eval()
            with torch.no_grad():
                accs.append((host(data.val_x).argmax(1) == data.val_y).float().mean())
            host.train()
        torch.stack(accs).cpu()
    return config.n_envs * config.episode_length


def full_round(config: TrainConfig, data: TaskData, round_: int, live_seeds: int) -> int:
    trainer = with_live_seeds(build_trainer(config, NullHooks(TelemetryLevel.NORMAL), data=data), live_seeds)
    trainer.run_round(round_)
    return config.n_envs * config.episode_length


def count_syncs(config: TrainConfig, live_seeds: int, level: TelemetryLevel, cuda: bool = False) -> RoundSyncs:
    """Host syncs of a full round (the second; the first warms up), as ``bench/host_syncs.py`` counts
    them; ``cuda``: what ``torch.cuda.set_sync_debug_mode("warn")`` reports instead."""
    return count_host_syncs(lambda hooks: build_trainer(config, hooks), NullHooks(level), resolve_device(config.device),
                            live_seeds=live_seeds, counter=CudaSyncCounter() if cuda else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_args(parser)
    parser.add_argument("--repeats", type=int, default=2, help="rounds of each loop, interleaved")
    parser.add_argument("--live-seeds", type=int, default=0, help="seeds germinated at each episode start")
    ns = parser.parse_args()
    config = TrainConfig.from_args(ns)
    if config.cpu_threads > 0:
        torch.set_num_threads(config.cpu_threads)
    device = resolve_device(config.device)
    data = make_synthetic(config.seed, config.train_size, config.val_size).to(device, channels_last=True)
    bare_round(config, data, device, 0)  # warm-up both paths
    full_round(config, data, 0, ns.live_seeds)
    t_bare = t_full = 0.0
    n_bare = n_full = 0
    for r in range(1, ns.repeats + 1):
        t0 = time.perf_counter()
        n_bare += bare_round(config, data, device, r)
        t1 = time.perf_counter()
        n_full += full_round(config, data, r, ns.live_seeds)
        t_full += time.perf_counter() - t1
        t_bare += t1 - t0
    bare, full = n_bare / t_bare, n_full / t_full
    fields = {"device": device.type, "policy": config.policy, "n_envs": config.n_envs,
              "train_size": config.train_size, "val_size": config.val_size, "live_seeds": ns.live_seeds,
              "bare_env_epochs_per_s": f"{bare:.2f}", "full_env_epochs_per_s": f"{full:.2f}",
              "ratio": f"{full / bare:.3f}"}
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
