"""The anomaly detector measured by dose: recall against how much each fault costs, false alarms on unseen seeds.

Every run is the real loop with the real runtime (hub, run log, command path) at NORMAL telemetry,
read back from its run log. Seeds are split: the detector's thresholds were chosen on the
development seeds (``--split dev``: 0, 1, 2 …); the figures come from test seeds (100, 101 …) that no
threshold was tuned on.

1. healthy runs on the split's seeds: PPO at the default settings, the heuristic, and one longer PPO
   run like the learning benchmark's. Every anomaly in them is a false alarm (per 100 epochs).
2. every fault of ``faults.py`` at each of its doses, from barely harmful to extreme, injected after
   ``--inject-at`` epochs of the second round of a run on each of ``--fault-seeds`` seeds. Its cost
   is the accuracy it took: the struck env's (every env's for a run-wide fault) mean validation
   accuracy from the injection to the round's end, against the same run without the fault (same
   seed, same everything), which counts among the healthy runs. It is caught only by an anomaly of a
   kind that names it, in the env it struck (any env for a run-wide fault), within ``--catch-window``
   epochs after the injection; the delay is counted from the injection. (A fault run repeats its twin
   up to the injection: its epochs before it are not counted again.)

Last line: ``key=value`` pairs with ``recall_harmful=`` (recall over the injections that cost at least
``--harmful-pp`` accuracy points), ``recall=`` (over all) and ``false_alarms_per_100_epochs=``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import pathlib
import statistics
import sys
import tempfile
import time

import torch
from faults import Fault, FaultNotApplicable, FaultSites, dosed_faults  # a sibling script module

from leyline import EventKind, RunFinished, TelemetryLevel, TelemetryLevelChanged, decode_event
from leyline.esper import EpochCompleted
from nissa.hub import HubConfig
from nissa.runtime import RuntimeConfig, build_runtime
from trainer.build import build_trainer
from trainer.simic.config import TrainConfig, add_training_args
from trainer.telemetry.install import telemetry_for_training

SEEDS = {"dev": 0, "test": 100}
"""First seed of each split."""


@dataclasses.dataclass(frozen=True)
class RunReport:
    name: str
    epochs: int
    anomalies: list[tuple[int, int | None, str, str]]
    """(epoch, env, anomaly, detail) of every anomaly event."""
    windows: list[int]
    """Epochs at which an automatic DEBUG window opened."""
    accuracy: dict[tuple[int, int], float]
    """Validation accuracy per (epoch, env)."""


def run(config: TrainConfig, name: str, log_dir: pathlib.Path, fault: Fault | None = None) -> RunReport:
    """One run of ``config.rounds`` rounds, its events read back from its run log. Env by env
    (``--env-exec per-env``): the faults break each env's own modules and optimizers, which the
    batched step does not run through; a twin runs as its fault run does."""
    config = dataclasses.replace(config, env_exec="per-env")
    runtime = build_runtime(RuntimeConfig(hub=HubConfig(run_id=name, log_dir=log_dir), level=TelemetryLevel.NORMAL))
    sites = telemetry_for_training(runtime, config)
    wrapped = FaultSites(sites, fault) if fault is not None else None
    trainer = build_trainer(config, runtime, wrapped if wrapped is not None else sites)
    if wrapped is not None:
        wrapped.trainer = trainer
    start, status = time.perf_counter(), "failed"
    try:
        for round_ in range(1, config.rounds + 1):
            trainer.run_round(round_)
        status = "completed"
    finally:
        runtime.finish(RunFinished(status=status, duration_s=time.perf_counter() - start))
    if wrapped is not None and wrapped.applied_at is None:
        raise FaultNotApplicable(f"{name}: epoch {fault.epoch} never came")  # type: ignore[union-attr]
    events = [decode_event(line) for line in (log_dir / name / "events.jsonl").read_bytes().splitlines()]
    anomalies = [(e.epoch, e.env, e.payload.anomaly, e.payload.detail) for e in events
                 if e.kind is EventKind.ANOMALY_DETECTED]
    windows = [e.epoch for e in events if isinstance(e.payload, TelemetryLevelChanged)
               and e.payload.level is TelemetryLevel.DEBUG and (e.payload.command_id or "").startswith("auto-")]
    accuracy = {(e.epoch, e.env): e.payload.accuracy for e in events
                if isinstance(e.payload, EpochCompleted) and e.env is not None}
    return RunReport(name, trainer.epoch, anomalies, windows, accuracy)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def healthy(base: TrainConfig, first: int, seeds: int, long_rounds: int, log_dir: pathlib.Path) -> list[RunReport]:
    configs = [(f"ppo-seed{first + s}", dataclasses.replace(base, seed=first + s)) for s in range(seeds)]
    configs.append(("heuristic", dataclasses.replace(base, policy="heuristic", seed=first + seeds)))
    if long_rounds:
        configs.append((f"ppo-{long_rounds}-rounds", dataclasses.replace(base, seed=first + seeds + 1,
                                                                        rounds=long_rounds)))
    reports = []
    for name, config in configs:
        report = run(config, name, log_dir)
        reports.append(report)
        _say(f"healthy {name}: {report.epochs} epochs, {len(report.anomalies)} anomalies "
             + "; ".join(f"e{e} env {v} {a}: {d}" for e, v, a, d in report.anomalies))
    return reports


@dataclasses.dataclass(frozen=True)
class Outcome:
    fault: Fault
    seed: int
    cost_pp: float
    """Accuracy points the fault took (its twin's accuracy at the round's end minus its own)."""
    caught: bool
    delay: int | None
    window_delay: int | None
    false_alarms: int
    epochs_before: int
    first: str


def _accuracy_after(report: RunReport, fault: Fault, round_end: int, n_envs: int) -> float:
    """Mean validation accuracy of the struck env(s) from the injection to the round's end (one
    epoch's accuracy swings by several points in a healthy run; the mean over the epochs much less)."""
    envs = range(n_envs) if fault.env is None else [fault.env]
    epochs = range(fault.epoch + 1, round_end + 1)
    return statistics.fmean(report.accuracy[(epoch, e)] for e in envs for epoch in epochs)


def catches(report: RunReport, fault: Fault, window: int) -> list[tuple[int, int | None, str, str]]:
    """The anomalies that catch ``fault``: of a kind that names it, in the env it struck (any env for a
    run-wide fault), in the ``window`` epochs after its injection."""
    return [a for a in report.anomalies if fault.epoch < a[0] <= fault.epoch + window and a[2] in fault.expect
            and (fault.env is None or a[1] == fault.env)]


def inject(config: TrainConfig, fault: Fault, log_dir: pathlib.Path, twin: RunReport, window: int) -> Outcome:
    """One run of ``config`` with ``fault``; ``twin``: the same run without it."""
    report = run(config, f"fault-{fault.label}-seed{config.seed}", log_dir, fault)
    round_end = -(-fault.epoch // config.episode_length) * config.episode_length
    cost = 100 * (_accuracy_after(twin, fault, round_end, config.n_envs)
                  - _accuracy_after(report, fault, round_end, config.n_envs))
    before = [a for a in report.anomalies if a[0] <= fault.epoch]
    hits = catches(report, fault, window)
    windows = [w for w in report.windows if w > fault.epoch]
    delay = hits[0][0] - fault.epoch if hits else None
    window_delay = windows[0] - fault.epoch if windows and hits else None
    _say(f"fault {fault.label} seed {config.seed} after epoch {fault.epoch}: cost {cost:+.1f} pp, "
         + (f"{hits[0][2]} after {delay} epochs ({hits[0][3]})" if hits else "NOT caught")
         + (f"; {len(before)} anomalies before it" if before else ""))
    return Outcome(fault, config.seed, cost, bool(hits), delay, window_delay, len(before), fault.epoch,
                   hits[0][3] if hits else "")


def table(outcomes: list[Outcome], harmful: float) -> None:
    print(f"{'fault':<18}{'dose':>7}{'cost pp':>9}{'caught':>8}{'delay':>7}  first catch")
    by_dose: dict[tuple[str, float], list[Outcome]] = collections.defaultdict(list)
    for o in outcomes:
        by_dose[(o.fault.name, o.fault.dose)].append(o)
    for (name, dose), group in by_dose.items():
        delays = [o.delay for o in group if o.delay is not None]
        cost = statistics.fmean(o.cost_pp for o in group)
        print(f"{name:<18}{dose:>7g}{cost:>+9.1f}{sum(o.caught for o in group):>5}/{len(group):<2}"
              f"{(f'+{max(delays)}' if delays else '—'):>7}  {'harmful ' if cost >= harmful else ''}"
              f"{next((o.first for o in group if o.caught), '')[:70]}")


DEFAULTS = TrainConfig(device="cpu", log_every=0)
"""The runs this benchmark injects faults into unless told otherwise: on the CPU, quiet."""


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults (``DEFAULTS``), checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_args(parser, DEFAULTS)
    parser.add_argument("--split", choices=tuple(SEEDS), default="test",
                        help="seeds to measure on: dev (thresholds were chosen on them) or test (never seen)")
    parser.add_argument("--seeds", type=int, default=3, help="healthy PPO runs at the default settings")
    parser.add_argument("--long-rounds", type=int, default=12,
                        help="rounds of the longer healthy PPO run, like the learning benchmark's (0: none)")
    parser.add_argument("--fault-seeds", type=int, default=2, help="seeds each fault dose is injected on")
    parser.add_argument("--inject-at", type=int, default=6,
                        help="epoch of the second round after which each fault is injected")
    parser.add_argument("--catch-window", type=int, default=6, help="epochs after the injection a catch counts in")
    parser.add_argument("--harmful-pp", type=float, default=2.0, help="accuracy cost from which a dose is harmful")
    parser.add_argument("--faults", default="all", help="comma-separated fault names, or all")
    ns = parser.parse_args(argv)
    if not 1 <= ns.inject_at < ns.episode_length - 1:
        parser.error(f"--inject-at must be in 1..{ns.episode_length - 2} (an epoch of the second round)")
    if ns.fault_seeds < 1 or ns.catch_window < 1:
        parser.error("--fault-seeds and --catch-window must be >= 1")
    return ns


def main(argv: list[str] | None = None) -> None:
    ns = options(argv)
    base = TrainConfig.from_args(ns)
    faults = [f for f in dosed_faults(base.episode_length + ns.inject_at)
              if ns.faults == "all" or f.name in ns.faults.split(",")]
    first = SEEDS[ns.split]
    torch.set_num_threads(max(base.cpu_threads, 1))
    t0 = time.perf_counter()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = pathlib.Path(tmp)
        reports = healthy(base, first, ns.seeds, ns.long_rounds, log_dir)
        for s in range(ns.fault_seeds):
            seed = first + 50 + s
            for policy in sorted({f.policy for f in faults}):
                config = dataclasses.replace(base, policy=policy, seed=seed, rounds=max(base.rounds, 2))
                twin = run(config, f"twin-{policy}-seed{seed}", log_dir)
                reports.append(twin)
                outcomes += [inject(config, f, log_dir, twin, ns.catch_window) for f in faults if f.policy == policy]
    summarize(reports, outcomes, ns.harmful_pp, ns.split, time.perf_counter() - t0)


def summarize(reports: list[RunReport], outcomes: list[Outcome], harmful_pp: float, split: str, wall: float) -> None:
    # A fault run repeats its twin exactly up to the injection: its epochs before it are not counted again.
    epochs = sum(r.epochs for r in reports)
    per_check = collections.Counter(a for r in reports for _, _, a, _ in r.anomalies)
    alarms = sum(per_check.values())
    print(f"healthy ({split} seeds): {epochs} epochs in {len(reports)} runs (the twins included); false alarms "
          f"{alarms}" + "".join(f"; {k} {v}" for k, v in sorted(per_check.items())))
    table(outcomes, harmful_pp)
    harmful = [o for o in outcomes if o.cost_pp >= harmful_pp]
    caught = [o for o in outcomes if o.caught]
    missed = sorted({o.fault.label for o in harmful if not o.caught})
    fields = {
        "split": split,
        "recall_harmful": f"{sum(o.caught for o in harmful) / max(len(harmful), 1):.3f}",
        "harmful": len(harmful), "harmful_caught": sum(o.caught for o in harmful),
        "recall": f"{len(caught) / max(len(outcomes), 1):.3f}",
        "false_alarms_per_100_epochs": f"{100 * alarms / max(epochs, 1):.2f}",
        "false_alarms": alarms, "healthy_epochs": epochs, "injections": len(outcomes),
        "median_delay_harmful": statistics.median([o.delay for o in harmful if o.delay is not None] or [-1]),
        "missed_harmful": ",".join(missed) or "none",
        "wall_s": f"{wall:.0f}",
    }
    print(" ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
