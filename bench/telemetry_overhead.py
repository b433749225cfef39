"""Cost of telemetry on training throughput: env-epochs/s at NORMAL, DEBUG and in a profile window, against OFF.

Every variant runs the real loop (``run_training``) with the real runtime (hub writing the
run log, command processor, level controller) in this one process, interleaved round-robin
so that machine load drifts hit every variant alike; each figure is the median of
``--repeats`` runs and each ratio is variant / OFF. The profile variant is a NORMAL run
with a profile window over its first ``--profile-batches`` training batches.

    python bench/telemetry_overhead.py [--repeats 5] [--rounds 2] [--episode-length 4] [--threads 1]

Goals: NORMAL >= 0.98 and DEBUG >= 0.9 of OFF. Last line: key=value pairs.
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
from nissa.hub import HubConfig
from nissa.ranks import Ranks
from trainer.build import Hosting, build_run
from trainer.simic.config import TrainConfig

VARIANTS = ("OFF", "NORMAL", "DEBUG", "PROFILE")


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def one_run(variant: str, config: TrainConfig, log_dir: Path, profile_batches: int, tag: str) -> tuple[float, float]:
    """env-epochs per wall second and per CPU second (this process, all threads) of one run of ``variant``."""
    level = TelemetryLevel.NORMAL if variant == "PROFILE" else TelemetryLevel(variant)
    run = build_run(config, Ranks.single(), Hosting(hub=HubConfig(run_id=f"bench-{variant.lower()}-{tag}",
                                                                  log_dir=log_dir), level=level))
    run.open_start_windows(profile_batches=profile_batches if variant == "PROFILE" else None)
    runtime = run.runtime
    start, cpu = time.perf_counter(), time.process_time()
    summary = run.train()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    runtime.finish(RunFinished(status="completed", duration_s=elapsed), timeout=30.0)
    env_epochs = config.n_envs * summary.epochs
    return env_epochs / elapsed, env_epochs / cpu


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--episode-length", type=int, default=4)
    p.add_argument("--n-envs", type=int, default=2)
    p.add_argument("--profile-batches", type=int, default=20)
    p.add_argument("--stride", type=int, default=10, help="--gradient-telemetry-stride of the runs")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: steadier figures on a shared machine)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.WARNING)
    config = TrainConfig(device="cpu", rounds=args.rounds, episode_length=args.episode_length, n_envs=args.n_envs,
                         gradient_telemetry_stride=args.stride, log_every=0)
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu_rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="telemetry-bench-") as tmp:
        one_run("NORMAL", config, Path(tmp), args.profile_batches, "warmup")  # first-call costs out of the figures
        for i in range(args.repeats):
            for variant in VARIANTS:
                wall, cpu = one_run(variant, config, Path(tmp), args.profile_batches, str(i))
                rates[variant].append(wall)
                cpu_rates[variant].append(cpu)
    median = {v: statistics.median(r) for v, r in rates.items()}
    cpu_median = {v: statistics.median(r) for v, r in cpu_rates.items()}
    base, cpu_base = median["OFF"], cpu_median["OFF"]
    _say(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.repeats} interleaved repeats, "
         f"{config.n_envs} envs x {args.rounds} rounds x {args.episode_length} epochs, stride {args.stride}")
    _say("  (median; per CPU-second figures count only this process, so other load on the machine moves them less)")
    for v in VARIANTS:
        spread = f"{min(rates[v]):.2f}..{max(rates[v]):.2f}"
        _say(f"  {v:8s} {median[v]:8.2f} env-epochs/s (range {spread}) ratio {median[v] / base:.3f}   "
             f"{cpu_median[v]:8.2f} env-epochs/CPU-s ratio {cpu_median[v] / cpu_base:.3f}")
    normal, debug, prof = (median[v] / base for v in ("NORMAL", "DEBUG", "PROFILE"))
    c_normal, c_debug, c_prof = (cpu_median[v] / cpu_base for v in ("NORMAL", "DEBUG", "PROFILE"))
    _say(f"off_env_epochs_s={base:.3f} normal_ratio={normal:.3f} debug_ratio={debug:.3f} profile_ratio={prof:.3f} "
         f"normal_cpu_ratio={c_normal:.3f} debug_cpu_ratio={c_debug:.3f} profile_cpu_ratio={c_prof:.3f} "
         f"ratio={normal:.3f} normal_goal_met={normal >= 0.98} debug_goal_met={debug >= 0.9}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
