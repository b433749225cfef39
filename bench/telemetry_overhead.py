"""Cost of telemetry on training throughput: env-epochs/s at NORMAL, DEBUG and in a profile window, against OFF.

Every variant runs the real loop (``run_training``) with the real runtime (hub writing the
run log, command processor, level controller) in this one process, interleaved round-robin
so that machine load drifts hit every variant alike; each figure is the median of
``--repeats`` runs and each ratio is variant / OFF. The profile variant is a NORMAL run
with a profile window over its first ``--profile-batches`` training batches.

    python bench/telemetry_overhead.py [--repeats 5] [--rounds 2] [--episode-length 4]

Goals: NORMAL >= 0.97 and DEBUG >= 0.85 of OFF. Last line: key=value pairs.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from leyline import RunFinished, TelemetryLevel
from trainer.hub import HubConfig
from trainer.runtime import RuntimeConfig, build_runtime
from trainer.simic.config import TrainConfig
from trainer.simic.run import run_training
from trainer.telemetry.install import install_profiling

VARIANTS = ("OFF", "NORMAL", "DEBUG", "PROFILE")


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def one_run(variant: str, config: TrainConfig, log_dir: Path, profile_batches: int, tag: str) -> float:
    """env-epochs per second of one full run of ``variant``."""
    level = TelemetryLevel.NORMAL if variant == "PROFILE" else TelemetryLevel(variant)
    runtime = build_runtime(RuntimeConfig(hub=HubConfig(run_id=f"bench-{variant.lower()}-{tag}", log_dir=log_dir),
                                          level=level))
    install_profiling(runtime, profile_batches=profile_batches if variant == "PROFILE" else None)
    start = time.perf_counter()
    summary = run_training(config, runtime)
    elapsed = time.perf_counter() - start
    runtime.finish(RunFinished(status="completed", duration_s=elapsed), timeout=30.0)
    return config.n_envs * summary.epochs / elapsed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--episode-length", type=int, default=4)
    p.add_argument("--n-envs", type=int, default=2)
    p.add_argument("--profile-batches", type=int, default=20)
    p.add_argument("--stride", type=int, default=10, help="--gradient-telemetry-stride of the runs")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    config = TrainConfig(device="cpu", rounds=args.rounds, episode_length=args.episode_length, n_envs=args.n_envs,
                         gradient_telemetry_stride=args.stride, log_every=0)
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="telemetry-bench-") as tmp:
        one_run("NORMAL", config, Path(tmp), args.profile_batches, "warmup")  # first-call costs out of the figures
        for i in range(args.repeats):
            for variant in VARIANTS:
                rates[variant].append(one_run(variant, config, Path(tmp), args.profile_batches, str(i)))
    median = {v: statistics.median(r) for v, r in rates.items()}
    base = median["OFF"]
    _say(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.repeats} interleaved repeats, "
         f"{config.n_envs} envs x {args.rounds} rounds x {args.episode_length} epochs, stride {args.stride}")
    for v in VARIANTS:
        spread = f"{min(rates[v]):.2f}..{max(rates[v]):.2f}"
        _say(f"  {v:8s} {median[v]:8.2f} env-epochs/s  (range {spread})  ratio vs OFF {median[v] / base:.3f}")
    normal, debug, prof = (median[v] / base for v in ("NORMAL", "DEBUG", "PROFILE"))
    _say(f"off_env_epochs_s={base:.3f} normal_ratio={normal:.3f} debug_ratio={debug:.3f} "
         f"profile_ratio={prof:.3f} ratio={normal:.3f} normal_goal_met={normal >= 0.97} debug_goal_met={debug >= 0.85}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
