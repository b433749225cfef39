"""Loop diagnostics shared by the benchmarks and the tests: live seeds, and host syncs per epoch.

``with_live_seeds(trainer, n)`` starts every episode with a seed germinated in each of the
first ``n`` slots of every env (the policy still decides everything after that), so that
seed cost is part of a measurement. ``count_host_syncs`` runs rounds of the real loop under
``nissa.telemetry.syncs.HostSyncCounter`` and splits the syncs of the last round into
round setup (fresh hosts), each epoch, and the policy update.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from nissa.parts import HostSyncCounter
from trainer.hooks import RunHooks
from trainer.simic.env import Env
from trainer.simic.vectorized import VectorizedTrainer
from trainer.tamiyo.actions import Action, Op

SEED_BLUEPRINTS = ("conv_light", "attention", "depthwise")
# Made once at import: Action.row reads a host table, which a sync counter started later would
# take for a device tensor (it cannot know where tensors made before it live).
_GERMINATE = tuple(Action.from_row(Action.row(Op.GERMINATE, slot, blueprint=SEED_BLUEPRINTS[slot % 3]))
                   for slot in range(5))


def _shadow(obj: object, method: str, fn: Callable[..., object]) -> None:
    """``fn`` in place of ``obj``'s ``method``, on this instance only (what a diagnostic wraps)."""
    setattr(obj, method, fn)


def with_live_seeds(trainer: VectorizedTrainer, n: int) -> VectorizedTrainer:
    """Every fresh env starts its episode with seeds germinated in its first ``n`` slots."""
    if n <= 0:
        return trainer
    fresh = trainer.fresh_envs

    def seeded(round_: int) -> list[Env]:
        envs = fresh(round_)
        for env in envs:
            for slot in range(min(n, len(env.slots))):
                env.apply(_GERMINATE[slot])
        return envs

    _shadow(trainer, "fresh_envs", seeded)
    return trainer


@dataclass(frozen=True)
class RoundSyncs:
    """Host syncs of one round of the loop, by where they happened."""

    setup: int
    """Making the round's fresh hosts (and live seeds)."""
    epochs: list[int]
    """Each epoch: training batches, validation, the decision, the actions, the epoch's telemetry."""
    update: int
    """The policy update at the end of the round (0 for the heuristic)."""
    collections: list[int]
    """Gradient-telemetry collections in each epoch (each is one read of every env and scope)."""
    by_call: dict[str, int]
    """Every sync of the round by the call that made it (``cpu``, ``tolist``, ``__float__``, ...)."""

    @property
    def per_epoch(self) -> float:
        return sum(self.epochs) / len(self.epochs)


class SyncCounter(Protocol):
    """``HostSyncCounter`` (any device) or ``CudaSyncCounter`` (CUDA's own sync reports)."""

    count: int
    by_call: Counter[str]

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: Any) -> Any: ...


class _Marks:
    """The run's hooks, noting the counter at epoch ends and around the update; the rest passes through."""

    def __init__(self, hooks: RunHooks, counter: SyncCounter) -> None:
        self._hooks, self.counter = hooks, counter
        self.marks: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hooks, name)

    def mark(self, what: str) -> None:
        self.marks.append((what, self.counter.count))

    def epoch_end(self, epoch: int) -> None:
        self.mark("epoch")
        self._hooks.epoch_end(epoch)

    def update_begin(self, round_: int) -> None:
        self.mark("update_begin")
        self._hooks.update_begin(round_)

    def update_end(self, round_: int) -> None:
        self._hooks.update_end(round_)
        self.mark("update_end")


def count_host_syncs(build: Callable[[RunHooks], VectorizedTrainer], hooks: RunHooks, device: Any,
                     *, live_seeds: int = 0, rounds: int = 2, counter: SyncCounter | None = None) -> RoundSyncs:
    """Host syncs of the last of ``rounds`` rounds (the first ones warm up: optimizer state,
    normalizers, cuDNN). The trainer is built under the counter, so every tensor is classified from
    birth. ``counter``: a ``CudaSyncCounter`` to count what CUDA itself reports instead."""
    counter = counter if counter is not None else HostSyncCounter(device)
    with counter:
        marks = _Marks(hooks, counter)
        trainer = with_live_seeds(build(marks), live_seeds)
        fresh, due = trainer.fresh_envs, trainer.sites.gradients_due

        def fresh_marked(round_: int) -> list[Env]:
            envs = fresh(round_)
            marks.mark("setup")
            return envs

        def due_marked(batch: int) -> bool:
            if due(batch):
                marks.mark("collection")
                return True
            return False

        _shadow(trainer, "fresh_envs", fresh_marked)
        _shadow(trainer.sites, "gradients_due", due_marked)
        for round_ in range(1, rounds + 1):
            if round_ == rounds:
                marks.marks[:] = [("start", counter.count)]
                counter.by_call.clear()
            trainer.run_round(round_)
    return _split(marks.marks, dict(counter.by_call))


def _split(marks: list[tuple[str, int]], by_call: dict[str, int]) -> RoundSyncs:
    spans: dict[str, int] = {}
    epochs: list[int] = []
    collections = [0]
    last = marks[0][1]
    for what, value in marks[1:]:
        if what == "collection":
            collections[-1] += 1
            continue
        if what == "epoch":
            epochs.append(value - last)
            collections.append(0)
        else:
            spans[what] = value - last
        last = value
    return RoundSyncs(setup=spans.get("setup", 0), epochs=epochs, update=spans.get("update_end", 0),
                      collections=collections[: len(epochs)], by_call=by_call)
