"""What a checkpoint costs the training thread: its size and the pause per checkpoint, next to a round.

Two shapes, each trained for ``--rounds`` rounds with a checkpoint after every round (as
``esper-train --checkpoint-every 1`` does): the default run, and the CIFAR shape (32×32×3 images,
``--base-channels 32 --host-blocks 3``) with the policy at GPU scale (``--lstm-hidden 512``). The
pause is the training thread's stall (``state.capture``: every tensor copied to host memory); the
write (``torch.save``, sha256, fsync, rename) happens on the writer thread meanwhile. ``ratio`` is
the pause per checkpoint over the wall time of a round of the same run, measured side by side: the
share of training time checkpointing takes from the run.

    python bench/checkpoint.py [--rounds 3] [--episode-length 4] [--device cuda]

Last line: ``pause_ms=… bytes=… ratio=…`` (the CIFAR shape's) and the rest as key=value.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import statistics
import sys
import tempfile
import time

import torch

from leyline import TelemetryLevel
from trainer.build import run_training
from trainer.checkpoint import CheckpointConfig, Checkpointer, CheckpointStore
from trainer.hooks import NullHooks
from trainer.simic.config import TrainConfig


def measure(config: TrainConfig, root: pathlib.Path) -> dict[str, float]:
    checkpoints = Checkpointer(CheckpointConfig(every=1, keep=2), CheckpointStore(root),
                               run_config=config.as_flat_dict(), manifest={"run_id": "bench", "world_size": 1},
                               hub_seq=lambda: 0, control_state=lambda: {"level": "NORMAL", "windows": []})
    start = time.perf_counter()
    run_training(config, NullHooks(TelemetryLevel.NORMAL), checkpoints=checkpoints)
    round_s = (time.perf_counter() - start) / config.rounds
    pause = statistics.median(w.pause_s for w in checkpoints.written)
    return {"bytes": checkpoints.written[-1].bytes, "pause_ms": pause * 1e3,
            "write_ms": statistics.median(w.write_s for w in checkpoints.written) * 1e3,
            "round_s": round_s, "ratio": pause / round_s}


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--episode-length", type=int, default=4)
    parser.add_argument("--train-size", type=int, default=512)
    parser.add_argument("--lstm-hidden", type=int, default=512, help="the CIFAR shape's policy width")
    parser.add_argument("--device", default="cpu")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ns = options(argv)
    default = TrainConfig(rounds=ns.rounds, episode_length=ns.episode_length, train_size=ns.train_size,
                          device=ns.device, log_every=0)
    cifar = dataclasses.replace(default, base_channels=32, host_blocks=3, lstm_hidden=ns.lstm_hidden)
    torch.set_num_threads(max(default.cpu_threads, 1))
    fields: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, config in (("default", default), ("cifar", cifar)):
            figures = measure(config, pathlib.Path(tmp) / name)
            print(f"{name}: {figures}", file=sys.stderr)
            fields.update({f"{name}_{k}": v for k, v in figures.items()})
    last = {"pause_ms": fields["cifar_pause_ms"], "bytes": fields["cifar_bytes"], "ratio": fields["cifar_ratio"]}
    print(" ".join(f"{k}={v}" if k.endswith("bytes") else f"{k}={v:.6g}" for k, v in {**last, **fields}.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
