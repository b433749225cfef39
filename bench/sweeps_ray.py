"""``bench/sweeps.py``'s Ray Tune arm: the same tasks (``sweeps_tasks``) as function trainables under Ray Tune's
``PopulationBasedTraining`` (a trial exploits by stopping and restoring another's checkpoint), on a local Ray
(``num_cpus=2``, no dashboard, its files under the run's temporary folder).

Each trainable notes, into a JSON-lines file, every start from another trial's checkpoint (a restore) with the
time since that checkpoint was saved, and the step at which it passed the toy's target.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import sweeps_tasks as tasks


def available() -> str | None:
    """None when Ray Tune can be imported, else why not."""
    try:
        import ray.tune  # noqa: F401
    except ImportError as err:
        return f"ray[tune] is not installed ({err}); `make bench-sweeps` installs it"
    return None


def start(tmp: pathlib.Path) -> None:
    """A local Ray of two CPUs; its workers find ``sweeps_tasks`` (and this module) on their path."""
    import ray

    bench = str(pathlib.Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (bench, os.environ.get("PYTHONPATH", "")) if p)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # nothing leaves the machine
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"  # no progress tables on stdout (verbose=0 then holds)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             _temp_dir=str(tmp / "ray"), configure_logging=False)


def stop() -> None:
    import ray

    ray.shutdown()


def _note(path: str, entry: dict[str, Any]) -> None:
    with open(path, "a") as out:
        out.write(json.dumps(entry) + "\n")


def _restored(directory: str, log: str) -> dict[str, Any]:
    with open(os.path.join(directory, "state.json")) as f:
        state = json.load(f)
    _note(log, {"restore_ms": 1000 * (time.time() - state["saved_at"])})
    return state


def _report(metrics: dict[str, Any], step: int, interval: int, save: Any) -> None:
    from ray import tune

    if step % interval:
        tune.report(metrics)
        return
    with tempfile.TemporaryDirectory() as directory:
        save(directory)
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(directory))


def toy_trainable(config: dict[str, Any]) -> None:
    """The toy under Ray: the same step as Nissa's trial, the same sleep."""
    from ray import tune

    toy, rng, log = tasks.Toy(), random.Random(), config["log"]
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as directory:
            toy.load(_restored(directory, log))

    def save(directory: str) -> None:
        with open(os.path.join(directory, "state.json"), "w") as f:
            json.dump({**toy.state(), "saved_at": time.time()}, f)

    while True:
        toy.advance(config["lr"], rng)
        time.sleep(config["step_ms"] / 1000)
        if toy.done:
            _note(log, {"reached": toy.step})
        _report({"mean_accuracy": toy.accuracy, "done": toy.done}, toy.step, config["checkpoint_interval"], save)


def cnn_trainable(config: dict[str, Any]) -> None:
    """The CNN under Ray: restored weights and optimizer state, then the trial's (explored) values."""
    from ray import tune

    cnn, log, acc = tasks.Cnn(lr=config["lr"], momentum=config["momentum"]), config["log"], 0.0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as directory:
            _restored(directory, log)
            cnn.load(os.path.join(directory, "cnn.pt"))
        cnn.set_values(config)
        acc = cnn.accuracy()

    def save(directory: str) -> None:
        cnn.save(os.path.join(directory, "cnn.pt"))
        with open(os.path.join(directory, "state.json"), "w") as f:
            json.dump({"saved_at": time.time()}, f)

    while True:
        loss = cnn.advance()
        if cnn.step % config["eval_every"] == 0 or cnn.step >= config["steps"]:
            acc = cnn.accuracy()
        _report({"val_acc": acc, "loss": loss}, cnn.step, config["checkpoint_interval"], save)


@dataclass
class RayResult:
    best: float = float("nan")
    wall_s: float = 0.0
    reached: int | None = None
    restores: int = 0
    restore_ms: list[float] = field(default_factory=list)
    errors: int = 0
    error: str = ""

    @property
    def restore_ms_p50(self) -> float:
        return statistics.median(self.restore_ms) if self.restore_ms else float("nan")


def run_pbt(task: str, *, population: int, interval: int, steps: int, seed: int, tmp: pathlib.Path,
            step_ms: float = 0.0, eval_every: int = 5, shipped: bool = False,
            budget_s: float | None = None) -> RayResult:
    """One PBT run of ``task``. ``shipped``: the toy with Ray's example settings as shipped (lr 0.0001 for all,
    one CPU a trial, 2 checkpoints kept, ``fail_fast``); else every checkpoint kept, ``fail_fast`` off and the
    population side by side (``2/population`` CPU a trial), its values drawn as Nissa's are."""
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    random.seed(seed)  # the scheduler's draws
    log = tmp / f"ray-{task}-{seed}-{'shipped' if shipped else 'kept'}.jsonl"
    log.touch()
    metric = "mean_accuracy" if task == "toy" else "val_acc"
    low, high = tasks.TOY_LR if task == "toy" else tasks.CNN_LR
    if task == "toy":
        mutations: dict[str, Any] = {"lr": tune.uniform(low, high)}
    else:
        mutations = {"lr": tune.loguniform(low, high), "momentum": tune.uniform(*tasks.CNN_MOMENTUM)}
    space = {**mutations, "log": str(log), "step_ms": step_ms, "checkpoint_interval": interval,
             "eval_every": eval_every, "steps": steps}
    if shipped:
        mutations["some_other_factor"] = [1, 2]
        space.update(lr=0.0001, some_other_factor=1)
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=interval,
                                  hyperparam_mutations=mutations, quantile_fraction=0.25, resample_probability=0.25,
                                  perturbation_factors=(1.2, 0.8))
    trainable: Any = toy_trainable if task == "toy" else cnn_trainable
    if not shipped:
        trainable = tune.with_resources(trainable, {"cpu": 2 / population})
    stop = {"done": True, "training_iteration": steps} if task == "toy" else {"training_iteration": steps}
    tuner = tune.Tuner(
        trainable,
        run_config=tune.RunConfig(
            name=f"{task}-{seed}", storage_path=str(tmp / "ray-results"), verbose=0, stop=stop,
            failure_config=tune.FailureConfig(fail_fast=shipped),
            checkpoint_config=tune.CheckpointConfig(checkpoint_score_attribute=metric,
                                                    num_to_keep=2 if shipped else None)),
        tune_config=tune.TuneConfig(scheduler=pbt, metric=metric, mode="max", num_samples=population,
                                    reuse_actors=True, time_budget_s=budget_s),
        param_space=space)
    out = RayResult()
    began = time.perf_counter()
    try:
        grid = tuner.fit()
    except tune.TuneError as err:  # fail_fast: the first trial's error ends the experiment
        out.errors, out.error = 1, str(err).strip().splitlines()[-1][:200]
    else:
        out.errors = grid.num_errors
        if grid.errors:
            out.error = str(grid.errors[0]).strip().splitlines()[-1][:200]
        frames = [r.metrics_dataframe for r in grid if r.metrics_dataframe is not None]
        out.best = max((float(f[metric].max()) for f in frames if metric in f), default=float("nan"))
    out.wall_s = time.perf_counter() - began
    notes = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    out.restore_ms = [n["restore_ms"] for n in notes if "restore_ms" in n]
    out.restores = len(out.restore_ms)
    reached = [n["reached"] for n in notes if "reached" in n]
    out.reached = min(reached) if reached else None
    return out
