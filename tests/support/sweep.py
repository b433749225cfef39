"""A learning-rate sweep stored through the real ingest (a trainer's websocket, ``run_started`` with project,
group and tags, ``metrics`` events, ``run_finished``): runs whose ``loss`` and ``val_loss`` fall faster with a
larger learning rate, for the runs tables; a run of several ranks has each rank's. ``store_runs`` returns once the
server has summarised them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from leyline import Metrics, RunFinished, RunStarted, make_event, metric_value
from leyline.run_keys import run_key
from tests.support.clients import IngestClient

T0 = 1.79e9


@dataclass(frozen=True)
class SweepRun:
    name: str
    lr: float
    seed: int = 0
    group: str = ""
    project: str = "cifar"
    tags: tuple[str, ...] = ()
    steps: int = 8
    extra: dict[str, Any] = field(default_factory=dict)
    ranks: int = 1
    """Ranks of the run (torchrun): each sends its own events, its values ``rank`` above rank 0's."""

    @property
    def run_id(self) -> str:
        return "run-" + "".join(c if c.isalnum() or c in ".-" else "-" for c in self.name)

    def val_loss(self, step: int, rank: int = 0) -> float:
        """Falls as ``1 / (1 + lr·100·step)``, a little apart per seed: the largest lr has the best."""
        return 1.0 / (1.0 + self.lr * 100 * step) + 0.01 * self.seed + rank

    def events(self, order: int, rank: int = 0) -> list:
        config = {"lr": self.lr, "seed": self.seed, "optimizer": "adam", **self.extra}
        started = RunStarted(name=self.name, config=config, project=self.project, group=self.group,
                             tags=list(self.tags), world_size=self.ranks)
        ts = T0 + 100 * order  # later runs are newer: the table's default order is known
        out = [make_event(started, run_id=self.run_id, seq=1, ts=ts, rank=rank)]
        for step in range(1, self.steps + 1):
            loss = self.val_loss(step - 1, rank)
            values = {"loss": metric_value(2 * loss), "val_loss": metric_value(loss)}
            out.append(make_event(Metrics(values=values), run_id=self.run_id, seq=len(out) + 1, ts=ts + step,
                                  step=step, rank=rank))
        out.append(make_event(RunFinished(status="completed", duration_s=float(self.steps)), run_id=self.run_id,
                              seq=len(out) + 1, ts=ts + self.steps + 1, step=self.steps, rank=rank))
        return out


async def _send(url: str, spec: SweepRun, order: int, token: str | None) -> None:
    for rank in range(spec.ranks):
        events = spec.events(order, rank)
        async with IngestClient(url, spec.run_id, rank=rank, token=token) as client:
            await client.send(events)
            await client.wait_ack(events[-1].seq)


def store_runs(url: str, runs: Sequence[SweepRun], token: str | None = None, timeout: float = 60.0) -> dict[str, str]:
    """Each run stored and finished, then summarised by the server; returns run name → run id."""
    async def send_all() -> None:
        for order, spec in enumerate(runs):
            await _send(url, spec, order, token)

    # A thread of its own: the caller may be inside an event loop (Playwright's, an async test's).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, send_all()).result(timeout)
    deadline = time.monotonic() + timeout
    for spec in runs:
        while True:
            metrics = httpx.get(f"{url}/runs/{spec.run_id}", headers={"Authorization": f"Bearer {token}"} if token
                                else {}).json().get("metrics", {})
            if all(metrics.get(run_key(f"val_loss{{rank={rank}}}", spec.ranks), {}).get("count") == spec.steps
                   for rank in range(spec.ranks)):  # each rank's, as the run shows it
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{spec.run_id} not summarised: {metrics}")
            time.sleep(0.05)
    return {spec.name: spec.run_id for spec in runs}


def lr_sweep(group: str = "lr-sweep", seeds: int = 2) -> list[SweepRun]:
    """Three learning rates, ``seeds`` runs each, one group (a W&B sweep's shape)."""
    return [SweepRun(f"lr{lr}-s{s}", lr, seed=s, group=group, tags=("sweep",) if s == 0 else ())
            for lr in (0.001, 0.01, 0.1) for s in range(seeds)]


def mixed_ranks(steps: int = 3) -> list[SweepRun]:
    """A run of one rank (``one``) and a run of two (``two``): a table holding both kinds."""
    return [SweepRun("one", 0.01, steps=steps), SweepRun("two", 0.1, steps=steps, ranks=2)]


def best_text(spec: SweepRun, rank: int = 0) -> str:
    """A run's best ``val_loss`` of ``rank`` as a table cell writes it (4 significant digits)."""
    return f"{min(spec.val_loss(step, rank) for step in range(spec.steps)):.4g}"
