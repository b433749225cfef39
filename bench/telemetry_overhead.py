"""Cost of telemetry on training throughput: env-epochs/s at NORMAL, DEBUG, in a profile window and with system
metrics sampled, against OFF.

Every variant runs the real loop (``run_training``) with the real runtime (hub writing the
run log, command processor, level controller) in this one process, interleaved round-robin
so that machine load drifts hit every variant alike; each figure is the median of
``--repeats`` runs and each ratio is variant / OFF; beside them, the mean and sample standard deviation
of the repeats' own ratios (each repeat's variant over that repeat's OFF: ``<variant>_ratio_mean``, ``_sd``,
``<variant>_cpu_ratio_mean``, ``_sd`` for NORMAL and DEBUG). The profile variant is a NORMAL run
with a profile window over its first ``--profile-batches`` training batches. The system variant is a NORMAL
run with the system metrics sampler at ``--system-interval`` seconds (default 0.5: twenty times the default
rate, so that a run of seconds holds several samples); ``system_ratio`` is it against NORMAL, and
``system_sample_ms`` the CPU time of one sample on the sampler's thread, from which ``system_cost_pct`` is its
share of one CPU at the default 10 s interval. DEBUG_NO_HUB runs DEBUG's collectors on null hooks (the
events are made and dropped: no hub, no run log), what DEBUG costs the training thread apart from handling
its events.

    python bench/telemetry_overhead.py [--repeats 5] [--rounds 2] [--episode-length 4] [--threads 1]
        [--env-exec batched,per-env]

``--env-exec`` lists the env executions to measure, each against its own OFF, all interleaved in
the one invocation (per-env: each env in turn, the loop's reference; batched: the default).

Goals: NORMAL >= 0.98 and DEBUG >= 0.9 of OFF; system metrics within noise of NORMAL (cost <= 0.5%).
Last line: key=value pairs (the first execution's, then ``<key>_<execution>`` for each other one).
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
from nissa.system import SystemConfig, SystemSampler, start_system_metrics
from trainer.build import build_run, open_run, run_training
from trainer.hooks import NullHooks
from trainer.simic.config import TrainConfig

VARIANTS = ("OFF", "NORMAL", "DEBUG", "PROFILE", "SYSTEM", "DEBUG_NO_HUB")
DEFAULT_SYSTEM_INTERVAL_S = 10.0


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def one_run(variant: str, config: TrainConfig, log_dir: Path, profile_batches: int, tag: str,
            system_interval_s: float = 0.5) -> tuple[float, float]:
    """env-epochs per wall second and per CPU second (this process, all threads) of one run of ``variant``."""
    if variant == "DEBUG_NO_HUB":
        return _no_hub_run(config)
    level = TelemetryLevel.NORMAL if variant in ("PROFILE", "SYSTEM") else TelemetryLevel(variant)
    run = build_run(config, open_run(config, run_id=f"bench-{variant.lower()}-{tag}", log_dir=log_dir,
                                     level=level.value, system_metrics=False))
    run.run.start()  # run_started, as esper-train sends it
    run.run.open_start_windows(profile_batches=profile_batches if variant == "PROFILE" else None)
    runtime = run.run.runtime
    start, cpu = time.perf_counter(), time.process_time()
    stop_system = (start_system_metrics(runtime, SystemConfig(interval_s=system_interval_s))
                   if variant == "SYSTEM" else (lambda: None))
    summary = run.train()
    stop_system()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    run.run.end(RunFinished(status="completed", duration_s=elapsed), timeout=30.0)
    env_epochs = config.n_envs * summary.epochs
    return env_epochs / elapsed, env_epochs / cpu


def _no_hub_run(config: TrainConfig) -> tuple[float, float]:
    """DEBUG's collectors on null hooks: every measurement launched, read and turned into events, which go
    nowhere (no hub, no run log): what DEBUG costs the training thread itself."""
    start, cpu = time.perf_counter(), time.process_time()
    summary = run_training(config, NullHooks(TelemetryLevel.DEBUG))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    env_epochs = config.n_envs * summary.epochs
    return env_epochs / elapsed, env_epochs / cpu


def sample_cost_ms(samples: int = 50) -> float:
    """CPU milliseconds of one system sample (host and GPUs), taken by hand as the sampler's thread takes them."""
    sampler = SystemSampler(lambda payload: None, SystemConfig())
    sampler.open()
    sampler.sample()
    cpu = time.thread_time()
    for _ in range(samples):
        sampler.sample()
    cost = (time.thread_time() - cpu) / samples
    sampler.close()
    return 1000.0 * cost


def _mean_sd(variant: list[float], off: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation of the repeats' ratios, each repeat's variant over its own OFF
    (the two ran next to each other, under the same load)."""
    ratios = [v / o for v, o in zip(variant, off, strict=True)]
    return statistics.mean(ratios), statistics.stdev(ratios) if len(ratios) > 1 else 0.0


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--episode-length", type=int, default=4)
    p.add_argument("--n-envs", type=int, default=2)
    p.add_argument("--profile-batches", type=int, default=20)
    p.add_argument("--stride", type=int, default=10, help="--gradient-telemetry-stride of the runs")
    p.add_argument("--env-exec", default="batched", help="env executions measured, comma-separated "
                                                         "(batched, per-env; default batched)")
    p.add_argument("--system-interval", type=float, default=0.5,
                   help="seconds between system samples in the SYSTEM variant (default %(default)s)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default %(default)s: steadier figures on a shared machine)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.WARNING)
    execs = [e.strip() for e in args.env_exec.split(",") if e.strip()]
    configs = {e: TrainConfig(device="cpu", rounds=args.rounds, episode_length=args.episode_length,
                              n_envs=args.n_envs, gradient_telemetry_stride=args.stride, log_every=0,
                              env_exec=e) for e in execs}  # type: ignore[arg-type]
    rates: dict[tuple[str, str], list[float]] = {(e, v): [] for e in execs for v in VARIANTS}
    cpu_rates: dict[tuple[str, str], list[float]] = {(e, v): [] for e in execs for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="telemetry-bench-") as tmp:
        for e in execs:
            one_run("NORMAL", configs[e], Path(tmp), args.profile_batches, f"warmup-{e}")  # first-call costs out
        for i in range(args.repeats):
            for e in execs if i % 2 == 0 else execs[::-1]:
                for variant in VARIANTS:
                    wall, cpu = one_run(variant, configs[e], Path(tmp), args.profile_batches, f"{e}-{i}",
                                        args.system_interval)
                    rates[(e, variant)].append(wall)
                    cpu_rates[(e, variant)].append(cpu)
    _say(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.repeats} interleaved repeats, "
         f"{args.n_envs} envs x {args.rounds} rounds x {args.episode_length} epochs, stride {args.stride}")
    _say("  (median; per CPU-second figures count only this process, so other load on the machine moves them less)")
    sample_ms = sample_cost_ms()
    cost_pct = 100.0 * sample_ms / 1000.0 / DEFAULT_SYSTEM_INTERVAL_S
    fields: list[str] = []
    for n, e in enumerate(execs):
        median = {v: statistics.median(rates[(e, v)]) for v in VARIANTS}
        cpu_median = {v: statistics.median(cpu_rates[(e, v)]) for v in VARIANTS}
        base, cpu_base = median["OFF"], cpu_median["OFF"]
        _say(f" --env-exec {e}")
        spread: dict[str, tuple[float, float, float, float]] = {}
        for v in VARIANTS:
            runs = " ".join(f"{r:.2f}" for r in rates[(e, v)])
            spread[v] = (*_mean_sd(rates[(e, v)], rates[(e, "OFF")]),
                         *_mean_sd(cpu_rates[(e, v)], cpu_rates[(e, "OFF")]))
            _say(f"  {v:12s} {median[v]:8.2f} env-epochs/s (runs {runs}) ratio {median[v] / base:.3f}   "
                 f"{cpu_median[v]:8.2f} env-epochs/CPU-s ratio {cpu_median[v] / cpu_base:.3f}   "
                 "repeat by repeat: wall {:.3f} ± {:.3f}, per CPU-s {:.3f} ± {:.3f}".format(*spread[v]))
        normal, debug, prof = (median[v] / base for v in ("NORMAL", "DEBUG", "PROFILE"))
        c_normal, c_debug, c_prof = (cpu_median[v] / cpu_base for v in ("NORMAL", "DEBUG", "PROFILE"))
        system_ratio = median["SYSTEM"] / median["NORMAL"]
        c_local = cpu_median["DEBUG_NO_HUB"] / cpu_base
        suffix = "" if n == 0 else "_" + e.replace("-", "_")
        pairs = {"off_env_epochs_s": f"{base:.3f}", "normal_ratio": f"{normal:.3f}", "debug_ratio": f"{debug:.3f}",
                 "profile_ratio": f"{prof:.3f}", "normal_cpu_ratio": f"{c_normal:.3f}",
                 "debug_cpu_ratio": f"{c_debug:.3f}", "debug_no_hub_cpu_ratio": f"{c_local:.3f}",
                 "profile_cpu_ratio": f"{c_prof:.3f}", "system_ratio": f"{system_ratio:.3f}",
                 "system_cpu_ratio": f"{cpu_median['SYSTEM'] / cpu_median['NORMAL']:.3f}", "ratio": f"{normal:.3f}",
                 "normal_goal_met": str(normal >= 0.98), "debug_goal_met": str(debug >= 0.9),
                 # What telemetry costs in CPU time per env-epoch, whatever the loop's own speed.
                 "normal_cpu_ms_per_env_epoch": f"{1e3 * (1 / cpu_median['NORMAL'] - 1 / cpu_base):.1f}",
                 "debug_cpu_ms_per_env_epoch": f"{1e3 * (1 / cpu_median['DEBUG'] - 1 / cpu_base):.1f}"}
        for v in ("NORMAL", "DEBUG"):
            mean, sd, c_mean, c_sd = spread[v]
            pairs.update({f"{v.lower()}_ratio_mean": f"{mean:.3f}", f"{v.lower()}_ratio_sd": f"{sd:.3f}",
                          f"{v.lower()}_cpu_ratio_mean": f"{c_mean:.3f}", f"{v.lower()}_cpu_ratio_sd": f"{c_sd:.3f}"})
        fields += [f"{k}{suffix}={v}" for k, v in pairs.items()]
    _say(f"  system metrics: one sample costs {sample_ms:.3f} ms of CPU on the sampler's thread: {cost_pct:.4f}% of "
         f"one CPU at the default {DEFAULT_SYSTEM_INTERVAL_S:g} s interval (SYSTEM samples every "
         f"{args.system_interval:g} s)")
    fields += [f"system_sample_ms={sample_ms:.3f}", f"system_cost_pct={cost_pct:.4f}",
               f"system_goal_met={cost_pct <= 0.5}"]
    _say(" ".join(fields))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
