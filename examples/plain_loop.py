"""A plain PyTorch loop on Nissa: a small regression model on data it makes, live on a Nissa server.

    nissa-server --db runs/nissa.db &
    python examples/plain_loop.py --server http://127.0.0.1:8765 --steps 2000

Then, from another terminal (or ``esper-watch``): a debug window, a profile window, the loop's own
``set_lr``, a checkpoint, a stop::

    curl -X POST localhost:8765/escalate -d '{"run_id": "RUN", "action": "debug", "epochs": 20}'
    curl -X POST localhost:8765/escalate -d '{"run_id": "RUN", "action": "profile", "batches": 5}'
    curl -X POST localhost:8765/escalate \\
         -d '{"run_id": "RUN", "action": "profile", "target": "update", "phase": "validate"}'
    curl -X POST localhost:8765/escalate \\
         -d '{"run_id": "RUN", "action": "call", "name": "set_lr", "args": {"value": 0.01}}'
    curl -X POST localhost:8765/escalate -d '{"run_id": "RUN", "action": "stop"}'
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import torch

import nissa


def make_data(n: int, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Samples of a noisy linear target with a bend (one target for every seed: the validation set is drawn
    from what the training set is): a small MLP learns it in a few hundred steps."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    w = torch.randn(16, 1, generator=torch.Generator().manual_seed(0))
    y = torch.tanh(x @ w) + 0.05 * torch.randn(n, 1, generator=g)
    return x.to(device), y.to(device)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="A plain PyTorch loop streaming to a Nissa server.")
    p.add_argument("--server", default=None, help="nissa-server URL (default $NISSA_SERVER; none: log locally)")
    p.add_argument("--token", default=None, help="the server's token, if it has one (default $NISSA_TOKEN)")
    p.add_argument("--steps", type=int, default=500, help="training steps (a stop command ends it sooner)")
    p.add_argument("--log-dir", default="runs", help="where the run's directory goes")
    p.add_argument("--run-name", default="plain-loop")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--project", default="", help="the project the run belongs to (runs tables filter by it)")
    p.add_argument("--group", default="", help="its group: a sweep, the seeds of one experiment")
    p.add_argument("--tag", action="append", default=[], help="a tag (again for more)")
    p.add_argument("--notes", default=None, help="free text about the run")
    p.add_argument("--validate-every", type=int, default=20, help="steps between validations")
    p.add_argument("--step-delay", type=float, default=0.0, help="seconds to sleep each step (demos, tests)")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error(f"--steps must be >= 1, got {args.steps}")
    if not args.lr > 0:
        p.error(f"--lr must be > 0, got {args.lr}")
    if args.validate_every < 1:
        p.error(f"--validate-every must be >= 1, got {args.validate_every}")
    if not args.step_delay >= 0:
        p.error(f"--step-delay must be >= 0, got {args.step_delay}")
    try:  # it checks --server, --run-name and --device before anything runs
        run = nissa.init(server=args.server, token=args.token, run_name=args.run_name, log_dir=args.log_dir,
                         device=args.device, config={"lr": args.lr, "steps": args.steps, "model": "mlp-16-64-1"},
                         project=args.project or None, group=args.group or None, tags=args.tag,
                         notes=args.notes,
                         phases=["validate"])  # what a profile window of target "update" can record
    except (ValueError, TypeError, OSError) as err:
        p.error(str(err))
    device = torch.device(args.device)
    torch.manual_seed(0)
    x, y = make_data(4096, seed=1, device=device)
    x_val, y_val = make_data(512, seed=2, device=device)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    run.watch(model, name="mlp")
    checkpoints = pathlib.Path(args.log_dir) / run.run_id / "checkpoints"

    @run.command("set_lr", help="Set the learning rate of every parameter group")
    def set_lr(value: float) -> dict:
        if not value > 0:
            raise ValueError(f"lr must be > 0, got {value}")
        for group in opt.param_groups:
            group["lr"] = value
        return {"lr": value}

    @run.on_checkpoint
    def save(step: int) -> dict:
        checkpoints.mkdir(parents=True, exist_ok=True)
        path = checkpoints / f"step-{step}.pt"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, path)
        return {"path": str(path), "bytes": path.stat().st_size}

    run.on_stop(save)
    print(f"run id: {run.run_id}", flush=True)
    with run:
        for step in range(args.steps):
            with run.step():
                i = torch.randint(0, len(x), (64,), device=device)
                loss = torch.nn.functional.mse_loss(model(x[i]), y[i])
                opt.zero_grad()
                loss.backward()
                opt.step()
                values = {"loss": loss.detach(), "lr": opt.param_groups[0]["lr"]}
                if step % args.validate_every == 0:
                    with run.phase("validate"), torch.no_grad():
                        values["val_loss"] = torch.nn.functional.mse_loss(model(x_val), y_val)
                run.log(values)  # one host sync for the tensors of this call
            if run.should_stop:
                break
            if args.step_delay:
                time.sleep(args.step_delay)
    report = run.finish()
    print(f"run {run.run_id} {'stopped' if run.should_stop else 'completed'}: {report.describe()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
