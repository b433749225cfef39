"""Population-based training side by side: Nissa's PBT (in the trials' live processes), Ray Tune's PBT (a trial
exploits by stopping and restoring another's checkpoint) and random search, on the same two tasks, budgets,
populations and perturbations, several seeds each, in one invocation.

- ``toy``: Ray's own PBT example's objective (``sweeps_tasks``: the optimal lr follows a triangle wave of the
  accuracy), population 8, perturbation every 5 steps, until the accuracy passes 200 or 1,000 steps; each step
  sleeps ``--toy-step-ms`` in every arm (its compute is next to none). Ray is configured so that it can finish
  (every checkpoint kept, ``fail_fast`` off, the population side by side); once more as its example ships
  (2 checkpoints kept, ``fail_fast``, lr 0.0001 for all, one CPU a trial), its failures counted.
- ``cnn``: a small CNN on images it makes, a fixed step budget, population 4; real compute a step.

Nissa's arms run a real ``nissa-server``, ``POST /sweeps`` with the spec and one ``nissa sweep agent`` with as
many slots as the population; its trials are ``bench/sweeps_trial.py``. Random search is Nissa's ``random``
method over the same values and budget (no exploitation). The Ray arm is skipped, saying why, where ``ray`` is
not installed (``make bench-sweeps`` installs it).

    python bench/sweeps.py                 # 3 seeds of both tasks: several minutes on two cores
    python bench/sweeps.py --quick         # a smoke run at tiny sizes
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import sweeps_ray
import sweeps_tasks as tasks
from ingest import Server  # bench/ is the script's directory
from processes import stop_process

TRIAL = pathlib.Path(__file__).resolve().with_name("sweeps_trial.py")


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--tasks", default="toy,cnn", help="comma-separated: toy, cnn")
    p.add_argument("--toy-population", type=int, default=8)
    p.add_argument("--toy-steps", type=int, default=1000, help="the toy's step budget a trial")
    p.add_argument("--toy-interval", type=int, default=5, help="steps between perturbations")
    p.add_argument("--toy-step-ms", type=float, default=50.0, help="sleep a toy step, in every arm")
    p.add_argument("--cnn-population", type=int, default=4)
    p.add_argument("--cnn-steps", type=int, default=400)
    p.add_argument("--cnn-interval", type=int, default=25)
    p.add_argument("--shipped-runs", type=int, default=1, help="runs of Ray's example as shipped (failures)")
    p.add_argument("--shipped-budget-s", type=float, default=300.0, help="a shipped run ends by then")
    p.add_argument("--ray", choices=("auto", "off"), default="auto", help="off: skip Ray's arms")
    p.add_argument("--quick", action="store_true", help="a smoke run: one seed, tiny populations and budgets")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.toy_population, args.toy_steps, args.toy_step_ms = 1, 2, 40, 20.0
        args.cnn_population, args.cnn_steps, args.cnn_interval, args.shipped_runs = 2, 30, 10, 0
    args.tasks = [t for t in args.tasks.split(",") if t]
    if not set(args.tasks) <= {"toy", "cnn"} or not args.tasks:
        p.error("--tasks: toy, cnn or both")
    if args.seeds < 1 or min(args.toy_population, args.cnn_population) < 2:
        p.error("--seeds must be at least 1 and the populations at least 2")
    return args


@dataclass
class Outcome:
    """One method's run of one task and seed."""

    best: float
    wall_s: float
    reached: int | None = None
    restarts: int = 0
    exploit_ms: list[float] = field(default_factory=list)
    errors: int = 0
    error: str = ""


# --- Nissa ------------------------------------------------------------------------------------------------------

def _spec(task: str, method: str, args: argparse.Namespace, seed: int, out: pathlib.Path) -> dict[str, Any]:
    toy = task == "toy"
    steps = args.toy_steps if toy else args.cnn_steps
    command = [sys.executable, str(TRIAL), "--task", task, "--steps", str(steps), "--step-ms",
               str(args.toy_step_ms if toy else 0.0), "--out", str(out), "--log-dir", str(out.parent / "runs")]
    params: dict[str, Any] = ({"lr": {"min": tasks.TOY_LR[0], "max": tasks.TOY_LR[1]}} if toy else
                              {"lr": {"min": tasks.CNN_LR[0], "max": tasks.CNN_LR[1], "log": True},
                               "momentum": {"min": tasks.CNN_MOMENTUM[0], "max": tasks.CNN_MOMENTUM[1]}})
    population = args.toy_population if toy else args.cnn_population
    spec: dict[str, Any] = {
        "name": f"{task}-{method}-{seed}", "project": "bench-sweeps", "method": method, "command": command,
        "metric": {"name": "accuracy" if toy else "val_acc", "goal": "maximize"}, "parameters": params,
        "trials": population, "parallel": population, "seed": seed}
    if method == "pbt":
        spec["pbt"] = {"interval": args.toy_interval if toy else args.cnn_interval, "quantile": 0.25,
                       "perturb": [0.8, 1.2], "resample": 0.25}
    return spec


def run_nissa(server: Server, task: str, method: str, args: argparse.Namespace, seed: int,
              tmp: pathlib.Path) -> Outcome:
    """One sweep: created with ``POST /sweeps``, run by one agent with a slot per trial, to its end."""
    out = tmp / f"{task}-{method}-{seed}"
    spec = _spec(task, method, args, seed, out / "results")
    agent_log = out / "agent.log"
    out.mkdir(parents=True)
    began = time.perf_counter()
    created = httpx.post(f"{server.url}/sweeps", json=spec, timeout=60)
    created.raise_for_status()
    sweep_id = created.json()["sweep_id"]
    exe = pathlib.Path(sys.executable).with_name("nissa")
    with agent_log.open("w") as log:
        agent = subprocess.Popen([str(exe), "sweep", "agent", sweep_id, "--server", server.url, "--slots",
                                  str(spec["trials"]), "--log-dir", str(out / "trials")],
                                 stdout=log, stderr=subprocess.STDOUT, cwd=out)
        try:
            code = agent.wait(timeout=1800)
        finally:
            stop_process(agent)
    wall = time.perf_counter() - began
    if code != 0:
        raise SystemExit(f"sweeps: the agent of {spec['name']} exited {code}:\n{agent_log.read_text()[-2000:]}")
    sweep = httpx.get(f"{server.url}/sweeps/{sweep_id}", timeout=60).json()
    seen = [json.loads(p.read_text()) for p in sorted((out / "results").glob("*.json"))]
    started = agent_log.read_text().count("started as run")
    reached = [s["reached"] for s in seen if s["reached"] is not None]
    exploits = [e for t in sweep["trials"] for e in t.get("lineage", [])]
    return Outcome(best=max((s["best"] for s in seen), default=math.nan), wall_s=wall,
                   reached=min(reached) if reached else None, restarts=started - spec["trials"],
                   exploit_ms=[e["exploit_ms"] for e in exploits if e.get("exploit_ms") is not None],
                   errors=sum(t["status"] != "finished" for t in sweep["trials"]))


# --- the report -------------------------------------------------------------------------------------------------

def _mean_sd(values: list[float]) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "n/a"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3g} ± {sd:.2g}"


def _p50(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def summarize(name: str, runs: list[Outcome]) -> dict[str, float]:
    reached = [r.reached for r in runs if r.reached is not None]
    exploits = [ms for r in runs for ms in r.exploit_ms]
    row = {"best": statistics.mean(r.best for r in runs) if runs else math.nan,
           "wall_s": statistics.mean(r.wall_s for r in runs) if runs else math.nan,
           "restarts": sum(r.restarts for r in runs), "exploit_ms_p50": _p50(exploits),
           "reached": statistics.mean(reached) if reached else math.nan, "errors": sum(r.errors for r in runs)}
    steps = f"{row['reached']:.0f} ({len(reached)}/{len(runs)} reached)" if reached else f"- (0/{len(runs)})"
    p50 = "n/a" if math.isnan(row["exploit_ms_p50"]) else f"{row['exploit_ms_p50']:.0f} ms"
    print(f"  {name:<12} best {_mean_sd([r.best for r in runs]):<16} wall {_mean_sd([r.wall_s for r in runs]):<14}"
          f" s  steps to target {steps:<18} restarts {row['restarts']:<4} exploit p50 {p50}"
          f"  errors {row['errors']}", flush=True)
    return row


def run_task(task: str, args: argparse.Namespace, server: Server, ray_ok: bool,
             tmp: pathlib.Path) -> dict[str, dict[str, float]]:
    toy = task == "toy"
    population = args.toy_population if toy else args.cnn_population
    interval = args.toy_interval if toy else args.cnn_interval
    steps = args.toy_steps if toy else args.cnn_steps
    runs: dict[str, list[Outcome]] = {"nissa_pbt": [], "ray_pbt": [], "random": []}
    for seed in range(args.seeds):
        runs["nissa_pbt"].append(run_nissa(server, task, "pbt", args, seed, tmp))
        runs["random"].append(run_nissa(server, task, "random", args, seed, tmp))
        if ray_ok:
            got = sweeps_ray.run_pbt(task, population=population, interval=interval, steps=steps, seed=seed,
                                     tmp=tmp, step_ms=args.toy_step_ms if toy else 0.0)
            runs["ray_pbt"].append(Outcome(best=got.best, wall_s=got.wall_s, reached=got.reached,
                                           restarts=got.restores, exploit_ms=got.restore_ms, errors=got.errors))
        for name, got_runs in runs.items():
            if got_runs:
                r = got_runs[-1]
                print(f"  {task} seed {seed} {name}: best {r.best:.4g}, wall {r.wall_s:.1f} s, reached {r.reached}, "
                      f"restarts {r.restarts}, exploit p50 {_p50(r.exploit_ms):.0f} ms", flush=True)
    print(f"{task}: population {population}, perturbation every {interval} steps, budget {steps} steps"
          + (f", {args.toy_step_ms:g} ms sleep a step in every arm, target accuracy {tasks.TARGET:g}" if toy
             else ", val_acc on 512 held-out images") + f", {args.seeds} seed(s)")
    rows = {name: summarize(name, got) for name, got in runs.items() if got}
    if toy and ray_ok and args.shipped_runs:
        shipped = [sweeps_ray.run_pbt("toy", population=8, interval=5, steps=1000, seed=100 + i, tmp=tmp,
                                      shipped=True, budget_s=args.shipped_budget_s) for i in range(args.shipped_runs)]
        failed = [s for s in shipped if s.errors]
        print(f"  ray_shipped  Ray's example as shipped (2 checkpoints kept, fail_fast): {len(failed)}/"
              f"{len(shipped)} runs failed" + "".join(f"; after {s.wall_s:.0f} s: {s.error}" for s in failed)
              + "".join(f"; one ran {s.wall_s:.0f} s, best {s.best:.4g}" for s in shipped if not s.errors))
        rows["ray_shipped"] = {"failures": len(failed), "runs": len(shipped)}
    return rows


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    why = sweeps_ray.available() if args.ray == "auto" else "--ray off"
    if why:
        print(f"ray_pbt: skipped ({why})", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-sweeps-") as folder:
        tmp = pathlib.Path(folder)
        if not why:
            sweeps_ray.start(tmp)
        try:
            with Server(tmp / "nissa.db") as server:
                figures = {task: run_task(task, args, server, not why, tmp) for task in args.tasks}
        finally:
            if not why:
                sweeps_ray.stop()
    print(_key_values(figures, args))
    return 0


def _key_values(figures: dict[str, dict[str, dict[str, float]]], args: argparse.Namespace) -> str:
    first = figures[args.tasks[0]]
    nan = {"best": math.nan, "wall_s": math.nan}
    nissa, ray, rand = first["nissa_pbt"], first.get("ray_pbt", nan), first["random"]
    pairs: dict[str, Any] = {
        "seeds": args.seeds, "nissa_pbt_best": nissa["best"], "ray_pbt_best": ray["best"],
        "random_best": rand["best"], "nissa_pbt_wall_s": nissa["wall_s"], "ray_pbt_wall_s": ray["wall_s"],
        "nissa_restarts": sum(int(f["nissa_pbt"]["restarts"]) for f in figures.values()),
        "exploit_ms_p50": nissa["exploit_ms_p50"], "ratio": nissa["wall_s"] / ray["wall_s"]}
    for task, rows in figures.items():
        for name in ("nissa_pbt", "ray_pbt", "random"):
            if name in rows:
                pairs[f"{task}_{name}_best"] = rows[name]["best"]
                pairs[f"{task}_{name}_wall_s"] = rows[name]["wall_s"]
        if "ray_pbt" in rows:
            pairs[f"{task}_ray_restores"] = rows["ray_pbt"]["restarts"]
            pairs[f"{task}_ratio"] = rows["nissa_pbt"]["wall_s"] / rows["ray_pbt"]["wall_s"]
        if "ray_shipped" in rows:
            pairs["ray_shipped_failures"] = rows["ray_shipped"]["failures"]
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in pairs.items())


if __name__ == "__main__":
    raise SystemExit(main())
