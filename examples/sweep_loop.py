"""A plain PyTorch loop as a sweep's trial: its values come from ``run.config`` (the sweep's agent sets them),
PBT's explore reaches the optimizer through ``on_hparams``, its exploit loads another trial's weights through
``on_restore``; the process never restarts.

    nissa sweep create examples/sweeps/pbt.toml --server http://127.0.0.1:8765
    nissa sweep agent SWEEP_ID --server http://127.0.0.1:8765 --slots 4

Alone (no agent) it is an ordinary run with its defaults.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import torch

import nissa
from nissa.sweep import apply_hparams


def make_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A noisy bent linear target (the same for every seed)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    w = torch.randn(8, 1, generator=torch.Generator().manual_seed(0))
    return x, torch.tanh(x @ w) + 0.05 * torch.randn(n, 1, generator=g)


def fingerprint(model: torch.nn.Module) -> float:
    """One number that changes with every weight: the sum of the weights times their position."""
    with torch.no_grad():
        flat = torch.cat([p.flatten() for p in model.parameters()])
        return float((flat * torch.arange(1, flat.numel() + 1, dtype=flat.dtype)).sum())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="A plain loop, as a sweep's trial or alone.")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--step-s", type=float, default=0.0, help="sleep per step (a slower loop, for demos)")
    p.add_argument("--log-dir", default="nissa-runs")
    p.add_argument("--no-restore", action="store_true",
                   help="set no on_restore: a loop for grid, random and tpe sweeps only (a pbt sweep refuses it)")
    args = p.parse_args(argv)
    run = nissa.init(run_name="sweep-loop", config={"lr": 0.01, "momentum": 0.0, "hidden": 16},
                     log_dir=args.log_dir, system_metrics=False)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, int(run.config["hidden"])), torch.nn.Tanh(),
                                torch.nn.Linear(int(run.config["hidden"]), 1))
    opt = torch.optim.SGD(model.parameters(), lr=float(run.config["lr"]), momentum=float(run.config["momentum"]))
    run.on_hparams(lambda values: apply_hparams(opt, values))

    @run.on_checkpoint
    def save(step: int) -> dict:
        path = pathlib.Path(run.run_dir) / f"checkpoint-{step}.pt"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
        return {"path": str(path), "fingerprint": fingerprint(model)}

    def load(path: pathlib.Path) -> None:
        state = torch.load(path, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        run.log({"restored_fingerprint": fingerprint(model)})

    if not args.no_restore:
        run.on_restore(load)

    x, y = make_data(512, 1)
    vx, vy = make_data(256, 2)
    with run:
        for _ in range(args.steps):
            with run.step():
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                with torch.no_grad():
                    val = torch.nn.functional.mse_loss(model(vx), vy)
                run.log({"loss": loss.detach(), "val_loss": val, "lr": opt.param_groups[0]["lr"]})
            if run.should_stop:
                break
            if args.step_s:
                time.sleep(args.step_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
