"""The anomaly detector measured like a classifier: false alarms on healthy runs, recall and delay on faults.

Every run is the real loop with the real runtime (hub, run log, command path) at NORMAL telemetry,
read back from its run log:

1. healthy runs: the default PPO settings over several seeds, the heuristic, and one longer PPO
   run like the learning benchmark's; every anomaly event in them is a false alarm (reported per
   check, per 100 epochs);
2. one run per fault (``faults.py``), injected after a known epoch of the second round: caught or
   not (an anomaly of the kinds that name the fault), the delay in epochs from the injection to
   that anomaly event and to the DEBUG window it opened by itself. Anomalies before the injection
   count as false alarms too.

Last line: ``key=value`` pairs with ``recall=`` and ``false_alarms_per_100_epochs=``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import pathlib
import sys
import tempfile
import time

import torch

from leyline import EventKind, RunFinished, TelemetryLevel, TelemetryLevelChanged, decode_event
from nissa.hub import HubConfig
from nissa.runtime import RuntimeConfig, build_runtime
from trainer.simic.config import TrainConfig, add_training_args
from trainer.build import build_trainer
from trainer.telemetry.install import telemetry_for_training

from faults import Fault, FaultNotApplicable, FaultSites, standard_faults  # a sibling script module


@dataclasses.dataclass(frozen=True)
class RunReport:
    name: str
    epochs: int
    anomalies: list[tuple[int, str, str]]
    """(epoch, anomaly, detail) of every anomaly event."""
    windows: list[int]
    """Epochs at which an automatic DEBUG window opened."""


def run(config: TrainConfig, name: str, log_dir: pathlib.Path, fault: Fault | None = None) -> RunReport:
    """One run of ``config.rounds`` rounds, its events read back from its run log."""
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
        runtime.finish(RunFinished(status=status, duration_s=time.perf_counter() - start, epochs=trainer.epoch))
    if wrapped is not None and wrapped.applied_at is None:
        raise FaultNotApplicable(f"{name}: epoch {fault.epoch} never came")  # type: ignore[union-attr]
    events = [decode_event(line) for line in (log_dir / name / "events.jsonl").read_bytes().splitlines()]
    anomalies = [(e.epoch, e.payload.anomaly, e.payload.detail) for e in events
                 if e.kind is EventKind.ANOMALY_DETECTED]
    windows = [e.epoch for e in events if isinstance(e.payload, TelemetryLevelChanged)
               and e.payload.level is TelemetryLevel.DEBUG and (e.payload.command_id or "").startswith("auto-")]
    return RunReport(name, trainer.epoch, anomalies, windows)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def healthy(base: TrainConfig, seeds: int, long_rounds: int, log_dir: pathlib.Path) -> list[RunReport]:
    configs = [(f"ppo-seed{s}", dataclasses.replace(base, seed=s)) for s in range(seeds)]
    configs.append(("heuristic", dataclasses.replace(base, policy="heuristic", seed=seeds)))
    if long_rounds:
        configs.append((f"ppo-{long_rounds}-rounds", dataclasses.replace(base, seed=seeds + 1, rounds=long_rounds)))
    reports = []
    for name, config in configs:
        report = run(config, name, log_dir)
        reports.append(report)
        _say(f"healthy {name}: {report.epochs} epochs, {len(report.anomalies)} anomalies "
             + "; ".join(f"e{e} {a}: {d}" for e, a, d in report.anomalies))
    return reports


@dataclasses.dataclass(frozen=True)
class Outcome:
    fault: Fault
    caught: bool
    delay: int | None
    window_delay: int | None
    false_alarms: int
    epochs_before: int
    first: str


def inject(base: TrainConfig, fault: Fault, log_dir: pathlib.Path) -> Outcome:
    config = dataclasses.replace(base, policy=fault.policy, rounds=max(base.rounds, 2))
    report = run(config, f"fault-{fault.name}", log_dir, fault)
    before = [a for a in report.anomalies if a[0] <= fault.epoch]
    hits = [a for a in report.anomalies if a[0] > fault.epoch and a[1] in fault.expect]
    windows = [w for w in report.windows if w > fault.epoch]
    delay = hits[0][0] - fault.epoch if hits else None
    window = windows[0] - fault.epoch if windows and hits else None
    _say(f"fault {fault.name} after epoch {fault.epoch}: "
         + (f"{hits[0][1]} after {delay} epochs ({hits[0][2]})" if hits else "NOT caught")
         + (f", DEBUG window after {window}" if window is not None else "")
         + (f"; {len(before)} anomalies before it" if before else ""))
    return Outcome(fault, bool(hits), delay, window, len(before), fault.epoch, hits[0][2] if hits else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_args(parser)
    parser.add_argument("--seeds", type=int, default=3, help="healthy PPO runs at the default settings")
    parser.add_argument("--long-rounds", type=int, default=12,
                        help="rounds of the longer healthy PPO run, like the learning benchmark's (0: none)")
    parser.add_argument("--inject-at", type=int, default=4,
                        help="epoch of the second round after which each fault is injected")
    parser.add_argument("--faults", default="all", help="comma-separated fault names, or all")
    ns = parser.parse_args()
    base = dataclasses.replace(TrainConfig.from_args(ns), device="cpu", log_every=0)
    if not 1 <= ns.inject_at < base.episode_length - 1:
        parser.error(f"--inject-at must be in 1..{base.episode_length - 2} (an epoch of the second round)")
    epoch = base.episode_length + ns.inject_at
    faults = [f for f in standard_faults(epoch) if ns.faults == "all" or f.name in ns.faults.split(",")]
    torch.set_num_threads(max(base.cpu_threads, 1))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = pathlib.Path(tmp)
        reports = healthy(base, ns.seeds, ns.long_rounds, log_dir)
        outcomes = [inject(base, f, log_dir) for f in faults]
    epochs = sum(r.epochs for r in reports) + sum(o.epochs_before for o in outcomes)
    per_check = collections.Counter(a for r in reports for _, a, _ in r.anomalies)
    alarms = sum(per_check.values()) + sum(o.false_alarms for o in outcomes)
    print(f"healthy: {sum(r.epochs for r in reports)} epochs in {len(reports)} runs, plus "
          f"{sum(o.epochs_before for o in outcomes)} epochs before injections; false alarms {alarms}"
          + "".join(f"; {k} {v}" for k, v in sorted(per_check.items())))
    print(f"{'fault':<18}{'caught':<8}{'anomaly':>8}{'window':>8}  detail")
    for o in outcomes:
        print(f"{o.fault.name:<18}{'yes' if o.caught else 'NO':<8}{_epochs(o.delay):>8}{_epochs(o.window_delay):>8}"
              f"  {o.first}")
    caught = [o for o in outcomes if o.caught]
    abrupt = [o for o in outcomes if o.fault.abrupt]
    fields = {
        "recall": f"{len(caught) / max(len(outcomes), 1):.3f}",
        "false_alarms_per_100_epochs": f"{100 * alarms / max(epochs, 1):.2f}",
        "faults": len(outcomes), "caught": len(caught),
        "abrupt_within_2": sum(o.caught and o.delay is not None and o.delay <= 2 for o in abrupt),
        "abrupt": len(abrupt),
        "max_delay_abrupt": max((o.delay for o in abrupt if o.delay is not None), default=-1),
        **{f"delay_{o.fault.name}": -1 if o.delay is None else o.delay for o in outcomes},
        "healthy_epochs": epochs, "wall_s": f"{time.perf_counter() - t0:.0f}",
    }
    print(" ".join(f"{k}={v}" for k, v in fields.items()))


def _epochs(delay: int | None) -> str:
    return "—" if delay is None else f"+{delay}"


if __name__ == "__main__":
    main()
