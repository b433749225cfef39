"""Autocast through the real loop on CPU: bfloat16 when asked for, full precision by default."""

from __future__ import annotations

import math

import pytest
import torch

from leyline import TelemetryLevel
from leyline.esper import EpochCompleted, PPOUpdate
from tests.trainer.test_build import RecordingHooks
from trainer.build import build_trainer
from trainer.simic.config import TrainConfig
from trainer.simic.diagnostics import with_live_seeds
from trainer.simic.env import Env
from trainer.simic.vectorized import VectorizedTrainer

TINY = dict(device="cpu", policy="ppo", n_envs=1, rounds=1, episode_length=3, train_size=128, val_size=64,
            batch_size=64, base_channels=4, lstm_hidden=8, log_every=0, min_training_epochs=1, min_prune_age=1,
            embargo_epochs=1, slots=("r0c0", "r0c1"))


def _run(amp_dtype: str, env_exec: str = "per-env") -> tuple[RecordingHooks, dict[str, set[torch.dtype]], list[Env]]:
    """One short round with live seeds; the dtypes the host blocks and seeds computed in while training
    (batched: the dtype of the batched forward's logits, under "host")."""
    hooks = RecordingHooks(TelemetryLevel.NORMAL)
    config = TrainConfig(amp_dtype=amp_dtype, env_exec=env_exec, **TINY)  # type: ignore[arg-type]
    trainer: VectorizedTrainer = with_live_seeds(build_trainer(config, hooks), 2)
    seen: dict[str, set[torch.dtype]] = {"host": set(), "seed": set()}
    envs: list[Env] = []
    fresh = trainer.fresh_envs

    def record(kind: str):
        def hook(module, inputs, out) -> None:
            if torch.is_grad_enabled():  # training batches (validation runs under no_grad)
                seen[kind].add(out.dtype)
        return hook

    def watched(round_: int) -> list[Env]:
        made = fresh(round_)
        for env in made:
            for block in env.model.host.blocks:
                block.register_forward_hook(record("host"))
            for slot in env.slots:
                assert slot.seed is not None
                slot.seed.register_forward_hook(record("seed"))
        envs.extend(made)
        return made

    trainer.fresh_envs = watched  # type: ignore[method-assign]
    batched = trainer.batched
    if batched is not None:
        forward = batched.forward

        def batched_forward(x: torch.Tensor) -> torch.Tensor:
            out = forward(x)
            seen["host"].add(out.dtype)
            return out

        batched.forward = batched_forward  # type: ignore[method-assign]
    trainer.run_round(1)
    return hooks, seen, envs


@pytest.mark.parametrize("env_exec", ["per-env", "batched"])
@pytest.mark.parametrize("amp_dtype", ["bfloat16", "auto"])
def test_cpu_autocast_runs_the_loop_only_when_asked_for(amp_dtype, env_exec):
    hooks, seen, envs = _run(amp_dtype, env_exec)
    want = torch.bfloat16 if amp_dtype == "bfloat16" else torch.float32
    # Batched, the per-env modules run only in validation (under no_grad): the batched forward's logits tell.
    expected = {"host": {want}, "seed": {want}} if env_exec == "per-env" else {"host": {want}, "seed": set()}
    assert seen == expected, seen
    for env in envs:  # autocast changes how ops compute, never what the weights are stored in
        assert {p.dtype for p in env.model.parameters()} == {torch.float32}
    epochs = [p for _, p in hooks.of(EpochCompleted)]
    assert len(epochs) == 3 and all(math.isfinite(p.train_loss) and math.isfinite(p.val_loss) for p in epochs)
    (update,) = [p for _, p in hooks.of(PPOUpdate)]
    assert math.isfinite(update.policy_loss)
