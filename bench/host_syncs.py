"""Host synchronizations per epoch of the Esper loop at NORMAL and at DEBUG telemetry.

Counted with ``nissa.telemetry.syncs.HostSyncCounter`` on any device: what would make the
host wait for the device on a GPU run (reads of device tensors, blocking uploads). With
``--device cuda`` it also counts what ``torch.cuda.set_sync_debug_mode("warn")`` reports, the
ground truth the CPU count stands in for. The last of ``--rounds`` rounds is counted (the
first warm up), split into round setup (fresh hosts), epochs and the policy update.

Budget: NORMAL at most 4 per epoch plus one per gradient-telemetry collection (every
``--gradient-telemetry-stride`` batches); DEBUG one per collection (every batch), however
many envs and scopes.

    python bench/host_syncs.py [--policy ppo] [--n-envs 4] [--live-seeds 2] [--device cuda]

Last line: ``syncs_per_epoch_normal=… syncs_per_epoch_debug=…`` and the rest as key=value.
"""

from __future__ import annotations

import argparse
import sys

import torch

from leyline import TelemetryLevel
from nissa.telemetry.syncs import CudaSyncCounter
from trainer.build import build_trainer
from trainer.hooks import NullHooks
from trainer.simic.config import TrainConfig, add_training_args
from trainer.simic.diagnostics import RoundSyncs, count_host_syncs
from trainer.simic.runtime import resolve_device

DEFAULTS = TrainConfig(rounds=2)
"""The runs this benchmark counts unless told otherwise: two rounds, the first warming up."""


def measure(config: TrainConfig, level: TelemetryLevel, live_seeds: int, cuda: bool = False) -> RoundSyncs:
    return count_host_syncs(lambda hooks: build_trainer(config, hooks), NullHooks(level), resolve_device(config.device),
                            live_seeds=live_seeds, rounds=config.rounds, counter=CudaSyncCounter() if cuda else None)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults (``DEFAULTS``), checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_args(parser, DEFAULTS)
    parser.add_argument("--live-seeds", type=int, default=2, help="seeds germinated at each episode start")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ns = options(argv)
    config = TrainConfig.from_args(ns)
    torch.set_num_threads(max(config.cpu_threads, 1))
    fields: dict[str, object] = {}
    for level in (TelemetryLevel.NORMAL, TelemetryLevel.DEBUG):
        r = measure(config, level, ns.live_seeds)
        key = level.value.lower()
        print(f"{level.value:6s}: per epoch {r.epochs} (collections {r.collections}), setup {r.setup}, "
              f"update {r.update}; by call {r.by_call}", file=sys.stderr)
        fields[f"syncs_per_epoch_{key}"] = f"{r.per_epoch:.2f}"
        fields[f"collections_per_epoch_{key}"] = f"{sum(r.collections) / len(r.collections):.2f}"
        fields[f"syncs_per_update_{key}"] = r.update
        fields[f"syncs_setup_{key}"] = r.setup
        if resolve_device(config.device).type == "cuda":
            cuda = measure(config, level, ns.live_seeds, cuda=True)
            fields[f"cuda_syncs_per_epoch_{key}"] = f"{cuda.per_epoch:.2f}"
            fields[f"cuda_syncs_per_update_{key}"] = cuda.update
    first = ["syncs_per_epoch_normal", "syncs_per_epoch_debug"]
    print(" ".join(f"{k}={fields[k]}" for k in first + [k for k in fields if k not in first]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
