"""What a checkpoint holds, taken at a round boundary, and putting it back.

At a round boundary the PPO update has run and the rollout buffer and LSTM state are empty; the next
round builds fresh hosts, each from its own seed (``VectorizedTrainer.fresh_envs``): so hosts, seeds
and their optimizers need no saving. What carries over, and is saved: the policy and its optimizer,
the observation, reward and return normalizers, every random generator (torch CPU and CUDA, the data
order, the policy's sampling, Python's ``random``), the counters (round, step, epoch, best accuracy,
seeds fossilized and pruned), the telemetry collectors' histories (gradient EMAs, the anomaly
detector's), the telemetry level and its open DEBUG windows, and the hub's position (the last seq
logged). With that, a run resumed from a round-boundary checkpoint on the CPU repeats the
uninterrupted run exactly.

``capture`` runs on the training thread and copies every tensor to host memory (that copy is the
pause a checkpoint costs the run); serializing and writing happen elsewhere (``writer``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from trainer.simic.vectorized import VectorizedTrainer


@runtime_checkable
class Stateful(Protocol):
    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass
class Totals:
    """What the run achieved over all its rounds so far (the summary of a resumed run counts them all)."""

    round: int = 0
    fossilized: int = 0
    pruned: int = 0


def host_copy(value: Any) -> Any:
    """``value`` with every tensor copied to host memory (containers rebuilt, everything else shared)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: host_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(host_copy(v) for v in value)
    return value


def _rng_state() -> dict[str, Any]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    return {"torch": torch.get_rng_state(), "cuda": cuda, "python": random.getstate()}


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def capture(trainer: VectorizedTrainer, totals: Totals, *, config: dict[str, Any], telemetry: dict[str, Any] | None,
            control: dict[str, Any], hub_seq: int) -> dict[str, Any]:
    """The run's state after round ``totals.round``, every tensor copied to host memory."""
    progress = {"round": totals.round, "step": trainer.step, "epoch": trainer.epoch,
                "best_accuracy": trainer.best_accuracy, "fossilized": totals.fossilized, "pruned": totals.pruned}
    return host_copy({
        "progress": progress, "config": config, "rng": _rng_state(), "data_order": trainer.data_gen.get_state(),
        "agent": trainer.agent.state_dict(), "telemetry": telemetry, "control": control, "hub": {"seq": hub_seq},
    })


def restore(trainer: VectorizedTrainer, state: dict[str, Any], telemetry: Stateful | None) -> Totals:
    """Put ``state`` back into a freshly built ``trainer`` (and its telemetry collectors); returns the
    totals so far. The control state (level, windows) is the run's to restore (``Run.resume``)."""
    progress = state["progress"]
    trainer.step, trainer.epoch = int(progress["step"]), int(progress["epoch"])
    trainer.best_accuracy = float(progress["best_accuracy"])
    trainer.agent.load_state_dict(state["agent"])
    trainer.data_gen.set_state(state["data_order"])
    if telemetry is not None and state["telemetry"] is not None:
        telemetry.load_state_dict(state["telemetry"])
    _set_rng_state(state["rng"])
    return Totals(int(progress["round"]), int(progress["fossilized"]), int(progress["pruned"]))
