"""A trial of ``bench/sweeps.py``'s Nissa arms: the toy or the CNN (``sweeps_tasks``) as a plain loop on
``nissa.init``, its values from ``run.config``, explored through ``on_hparams``, exploited through
``on_checkpoint``/``on_restore`` in this process (no restart). At its end it writes what it saw (best metric,
the step it passed the target, restores) as JSON into ``--out``, named by its run id.

    nissa sweep agent SWEEP_ID --server URL --slots 8     # runs: python bench/sweeps_trial.py --task toy ...
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import time

import sweeps_tasks as tasks  # bench/ is the script's directory

import nissa


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="A trial of bench/sweeps.py (run by a Nissa sweep's agent).")
    p.add_argument("--task", choices=("toy", "cnn"), default="toy")
    p.add_argument("--steps", type=int, default=1000, help="the step budget (counted on across exploits)")
    p.add_argument("--step-ms", type=float, default=20.0, help="sleep a step (the toy's cost)")
    p.add_argument("--eval-every", type=int, default=5, help="the CNN's validation every N steps")
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("sweep-results"))
    p.add_argument("--log-dir", default="nissa-runs")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    defaults = {"lr": 0.01} if args.task == "toy" else {"lr": 0.05, "momentum": 0.0}
    run = nissa.init(run_name=f"sweep-{args.task}", config=defaults, log_dir=args.log_dir, system_metrics=False)
    values = {k: float(run.config[k]) for k in defaults}
    seen = {"best": 0.0, "reached": None, "restores": 0, "steps_run": 0}
    run.on_hparams(values.update)
    loop = _toy(run, args, values, seen) if args.task == "toy" else _cnn(run, args, values, seen)
    with run:
        loop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{run.run_id}.json").write_text(json.dumps(seen))
    return 0


def _toy(run: nissa.Run, args: argparse.Namespace, values: dict, seen: dict):
    toy, rng = tasks.Toy(), random.Random()

    @run.on_checkpoint
    def save(step: int) -> dict:
        path = pathlib.Path(run.run_dir) / f"toy-{step}.json"
        path.write_text(json.dumps(toy.state()))
        return {"path": str(path)}

    def load(path: pathlib.Path) -> None:
        toy.load(json.loads(pathlib.Path(path).read_text()))
        seen["restores"] += 1

    run.on_restore(load)

    def loop() -> None:
        while toy.step < args.steps and not toy.done and not run.should_stop:
            with run.step():
                toy.advance(values["lr"], rng)
                run.log({"accuracy": toy.accuracy, "toy_step": toy.step, "lr": values["lr"]})
            seen["steps_run"] += 1
            seen["best"] = max(seen["best"], toy.accuracy)
            if toy.done and seen["reached"] is None:
                seen["reached"] = toy.step
            time.sleep(args.step_ms / 1000)
    return loop


def _cnn(run: nissa.Run, args: argparse.Namespace, values: dict, seen: dict):
    cnn = tasks.Cnn(lr=values["lr"], momentum=values["momentum"])
    run.on_hparams(lambda v: (values.update(v), cnn.set_values(v)))

    @run.on_checkpoint
    def save(step: int) -> dict:
        path = pathlib.Path(run.run_dir) / f"cnn-{step}.pt"
        cnn.save(path)
        return {"path": str(path)}

    def load(path: pathlib.Path) -> None:
        cnn.load(path)
        seen["restores"] += 1

    run.on_restore(load)

    def loop() -> None:
        while cnn.step < args.steps and not run.should_stop:
            with run.step():
                loss = cnn.advance()
                metrics = {"loss": loss, "cnn_step": cnn.step, "lr": values["lr"]}
                if cnn.step % args.eval_every == 0 or cnn.step == args.steps:
                    metrics["val_acc"] = acc = cnn.accuracy()
                    seen["best"] = max(seen["best"], acc)
                run.log(metrics)
            seen["steps_run"] += 1
    return loop


if __name__ == "__main__":
    raise SystemExit(main())
