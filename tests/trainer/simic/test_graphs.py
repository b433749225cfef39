"""The graphed batched step's logic on the CPU: static inputs, blend weights read in place, eager where shapes
or measurements differ, and a failed capture that falls back to eager, counted in ``phase_timing``.

A real CUDA graph needs a GPU; here the capture is injected: a "graph" that replays the captured step
(reading its static inputs, as a graph does), or a capture that fails as CUDA's refusals do.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from leyline import PhaseTiming, TelemetryLevel
from tests.trainer.test_build import RecordingHooks
from trainer.build import build_trainer
from trainer.simic.config import ConfigError, TrainConfig
from trainer.simic.diagnostics import with_live_seeds
from trainer.simic.graphs import WARMUP, GraphedStep
from trainer.simic.vectorized import VectorizedTrainer

pytestmark = pytest.mark.usefixtures("one_thread")

CONFIG = dict(device="cpu", n_envs=3, rounds=1, episode_length=3, policy="heuristic", log_every=0, train_size=200,
              val_size=64, batch_size=32, min_training_epochs=1, gradient_telemetry_stride=3)


class ReplayedStep:
    """Stands in for a CUDA graph: ``replay()`` runs what was captured, on the captured (static) tensors."""

    def __init__(self, step: Callable[[], None]) -> None:
        self.step = step

    def replay(self) -> None:
        self.step()


def refuse(step: Callable[[], None]) -> None:
    raise RuntimeError("operation not permitted when stream is capturing")


def _trainer(level: TelemetryLevel = TelemetryLevel.OFF) -> tuple[VectorizedTrainer, RecordingHooks]:
    hooks = RecordingHooks(level)
    return with_live_seeds(build_trainer(TrainConfig(**CONFIG), hooks), 2), hooks  # type: ignore[arg-type]


def _graphed(trainer: VectorizedTrainer, capture: Callable) -> GraphedStep:
    assert trainer.batched is not None
    trainer.graphed = GraphedStep(trainer.batched, trainer.batch_size, capture=capture)
    trainer.sites.compile_monitor = trainer.graphed  # type: ignore[attr-defined]
    return trainer.graphed


def test_replays_give_the_eager_steps_results():
    eager, _ = _trainer()
    graphed, _ = _trainer()
    step = _graphed(graphed, ReplayedStep)
    a, b = eager.run_round(1), graphed.run_round(1)
    assert a.final_accuracy == pytest.approx(b.final_accuracy, abs=1e-6)
    for env_a, env_b in zip(eager.envs, graphed.envs, strict=True):
        for pa, pb in zip(env_a.model.parameters(), env_b.model.parameters(), strict=True):
            torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)
    # 7 batches an epoch (the last one short), every third measured: captured once per layout, replayed after.
    assert step.captures >= 1 and step.failures == 0 and step.replays > 0
    assert step.eager >= 3 * (1 + 2) and step.eager + step.replays == 3 * 7
    assert step.stats().mode == "cuda-graph" and step.stats().eager_fallbacks == 0


def test_a_failed_capture_runs_eagerly_and_is_counted_in_phase_timing():
    eager, _ = _trainer()
    graphed, hooks = _trainer(TelemetryLevel.MINIMAL)
    step = _graphed(graphed, refuse)
    a, b = eager.run_round(1), graphed.run_round(1)
    assert a.final_accuracy == pytest.approx(b.final_accuracy, abs=1e-6)
    assert step.replays == 0 and step.failures >= 1 and step.eager == 3 * 7
    timings = [p for _, p in hooks.of(PhaseTiming)]
    assert timings and timings[-1].compile is not None
    assert timings[-1].compile.mode == "cuda-graph" and timings[-1].compile.eager_fallbacks == step.failures
    assert "stream is capturing" in (timings[-1].compile.last_reason or "")


def test_warmup_comes_before_the_capture():
    trainer, _ = _trainer()
    captured: list[int] = []

    def capture(step: Callable[[], None]) -> ReplayedStep:
        captured.append(graphed.eager)
        return ReplayedStep(step)

    graphed = _graphed(trainer, capture)
    trainer.run_round(1)
    assert captured and captured[0] >= WARMUP


def test_cuda_graphs_need_a_cuda_device_and_the_batched_step():
    with pytest.raises(ConfigError, match="--cuda-graphs"):
        TrainConfig(device="cpu", cuda_graphs="on")
    with pytest.raises(ConfigError, match="--cuda-graphs"):
        TrainConfig(env_exec="per-env", cuda_graphs="on")
