"""A learning-rate sweep stored through the real client and ingest: runs of a plain loop (``nissa.init``,
``run.log``) whose ``loss`` and ``val_loss`` fall faster with a larger learning rate, for the runs tables."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import nissa


@dataclass(frozen=True)
class SweepRun:
    name: str
    lr: float
    seed: int = 0
    group: str | None = None
    project: str | None = "cifar"
    tags: tuple[str, ...] = ()
    steps: int = 8
    extra: dict[str, Any] = field(default_factory=dict)

    def val_loss(self, step: int) -> float:
        """Falls as ``1 / (1 + lr·100·step)``, a little apart per seed: the largest lr has the best."""
        return 1.0 / (1.0 + self.lr * 100 * step) + 0.01 * self.seed


def store_runs(url: str, log_dir: pathlib.Path, runs: Sequence[SweepRun], token: str | None = None) -> dict[str, str]:
    """Each run logged and finished; returns run name → run id."""
    ids = {}
    for spec in runs:
        meta: dict[str, Any] = {k: v for k, v in (("project", spec.project), ("group", spec.group),
                                                  ("tags", list(spec.tags))) if v}
        run = nissa.init(server=url, run_name=spec.name, log_dir=log_dir, token=token, **meta,
                         config={"lr": spec.lr, "seed": spec.seed, "optimizer": "adam", **spec.extra})
        for step in range(spec.steps):
            run.step()
            run.log({"loss": 2 * spec.val_loss(step), "val_loss": spec.val_loss(step)})
        run.finish()
        ids[spec.name] = run.run_id
    return ids


def lr_sweep(group: str = "lr-sweep", seeds: int = 2) -> list[SweepRun]:
    """Three learning rates, ``seeds`` runs each, one group (a W&B sweep's shape)."""
    return [SweepRun(f"lr{lr}-s{s}", lr, seed=s, group=group, tags=("sweep",) if s == 0 else ())
            for lr in (0.001, 0.01, 0.1) for s in range(seeds)]
