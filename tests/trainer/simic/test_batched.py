"""The batched envs against the per-env loop: from the same state, the same losses, gradients and parameters.

Two copies of the same round are built from the same seeds; one trains env by env (``Env.train_step``,
each env's own optimizers), the other as one batched model (``BatchedEnvs``). Seeds of several
blueprints sit in several slots, some training (straight-through), some blended in with different
styles and alphas, some in only a few envs (a group that gathers its members' channels); then a
germinate, a prune, a scheduled prune (a frozen seed still in the forward) and a fossilize regroup
them, and the momentum carried over must keep the two in step.
"""

from __future__ import annotations

import pytest
import torch

from leyline import DebugLayerStats, GradientHealth, Histograms, TelemetryLevel
from leyline.esper import EpochCompleted, SeedStage
from nissa.telemetry.syncs import HostSyncCounter
from tests.trainer.test_build import RecordingHooks
from trainer.build import build_trainer
from trainer.simic.config import TrainConfig
from trainer.simic.env import Env
from trainer.simic.sites import NullSites
from trainer.simic.vectorized import VectorizedTrainer
from trainer.tamiyo.actions import Action, Op
from trainer.telemetry.sites import SimicTelemetry

pytestmark = pytest.mark.usefixtures("one_thread")

CPU = torch.device("cpu")
SLOTS = ("r0c0", "r0c1", "r0c2")
# env → (slot, blueprint, style, stage, alpha): r0c0's conv_light is in every env (no gather), the rest in some.
PLAN = {
    0: [("r0c0", "conv_light", "linear_add", SeedStage.TRAINING, 0.0),
        ("r0c1", "attention", "gated", SeedStage.BLENDING, 0.3)],
    1: [("r0c0", "conv_light", "linear_add", SeedStage.TRAINING, 0.0),
        ("r0c1", "attention", "gated", SeedStage.BLENDING, 0.6),
        ("r0c2", "depthwise", "sigmoid_add", SeedStage.HOLDING, 1.0)],
    2: [("r0c0", "conv_light", "linear_add", SeedStage.TRAINING, 0.0),
        ("r0c1", "norm", "linear_multiply", SeedStage.BLENDING, 0.5),
        ("r0c2", "bottleneck", "linear_add", SeedStage.TRAINING, 0.0)],
    3: [("r0c0", "conv_light", "linear_add", SeedStage.TRAINING, 0.0),
        ("r0c1", "conv_small", "sigmoid_add", SeedStage.BLENDING, 0.4),
        ("r0c2", "conv_heavy", "gated", SeedStage.HOLDING, 1.0)],
}
TOL = dict(rtol=1e-4, atol=2e-6)


def _trainer(env_exec: str, n_envs: int = 4) -> VectorizedTrainer:
    config = TrainConfig(device="cpu", n_envs=n_envs, slots=SLOTS, policy="heuristic", log_every=0, batch_size=32,
                         train_size=256, val_size=64, env_exec=env_exec)  # type: ignore[arg-type]
    return build_trainer(config, RecordingHooks(TelemetryLevel.OFF))


def _place(env: Env, slot_id: str, blueprint: str, style: str, stage: SeedStage, alpha: float) -> None:
    """A seed in ``stage``: germinated legally, then put where the test needs it (alpha and all), with
    weights moved off their identity start so that every tensor has gradients worth comparing."""
    slot = env.model.slot(slot_id)
    slot.germinate(blueprint, style, 3, f"{slot_id}-{blueprint}", CPU)
    slot.advance()  # G1: TRAINING
    slot.stage, slot.alpha.alpha = stage, alpha
    with torch.no_grad():
        for p in slot.seed.parameters():  # type: ignore[union-attr]
            p.add_(0.05 * torch.randn_like(p))


def _round(env_exec: str) -> tuple[VectorizedTrainer, list[Env]]:
    trainer = _trainer(env_exec)
    envs = trainer.envs = trainer.fresh_envs(1)
    torch.manual_seed(7)
    for e, env in enumerate(envs):
        for spec in PLAN[e]:
            _place(env, *spec)
        env.model.train()
        env._refresh()
    return trainer, envs


def _step(trainer: VectorizedTrainer, envs: list[Env], batch: int, measure: bool = True) -> None:
    data = trainer.data
    x, y = data.train_x[batch * 32: (batch + 1) * 32], data.train_y[batch * 32: (batch + 1) * 32]
    if trainer.batched is None:
        for env in envs:
            env.train_step(x, y, measure, False, NullSites())
    else:
        trainer.batched.prepare(envs)
        trainer.batched.train_step(x, y, measure, False, NullSites())


def _grad(trainer: VectorizedTrainer, p: torch.Tensor) -> torch.Tensor | None:
    if trainer.batched is None:
        return p.grad
    layout = trainer.batched.layout
    return None if layout is None else layout.grads.get(id(p))


def _assert_same(a: tuple[VectorizedTrainer, list[Env]], b: tuple[VectorizedTrainer, list[Env]]) -> None:
    (ta, ea), (tb, eb) = a, b
    for env_a, env_b in zip(ea, eb, strict=True):
        torch.testing.assert_close(env_a.train_loss_sum, env_b.train_loss_sum, **TOL)
        params_a, params_b = dict(env_a.model.named_parameters()), dict(env_b.model.named_parameters())
        assert params_a.keys() == params_b.keys()
        for name, pa in params_a.items():
            pb = params_b[name]
            torch.testing.assert_close(pa, pb, **TOL, msg=lambda m, n=name, e=env_a.index: f"env {e} {n}: {m}")
            ga, gb = _grad(ta, pa), _grad(tb, pb)
            if ga is not None and pa.requires_grad:
                assert gb is not None, f"env {env_a.index} {name}: no batched gradient"
                torch.testing.assert_close(ga, gb, **TOL, msg=lambda m, n=name, e=env_a.index: f"env {e} {n} grad: {m}")
        for (name, ba), (_, bb) in zip(env_a.model.named_buffers(), env_b.model.named_buffers(), strict=True):
            torch.testing.assert_close(ba.float(), bb.float(), **TOL, msg=lambda m, n=name: f"{n}: {m}")


def _act(env: Env, op: Op, slot: int, **kw: object) -> None:
    env.apply(Action.from_row(Action.row(op, slot, **kw)))  # type: ignore[arg-type]


def _lifecycle(envs: list[Env]) -> None:
    """A germinate, a prune, a scheduled prune and a fossilize, then the epoch boundary's ticks."""
    torch.manual_seed(11)
    _act(envs[0], Op.GERMINATE, 2, blueprint="bottleneck")  # joins env 2's bottleneck group once TRAINING
    _act(envs[2], Op.PRUNE, 1)  # now: its norm seed leaves
    _act(envs[1], Op.PRUNE, 1, alpha_speed=3)  # scheduled: frozen, still blended in while alpha ramps down
    envs[3].model.slot("r0c2").contribution = 0.02  # G5 needs a measured contribution
    _act(envs[3], Op.FOSSILIZE, 2)
    for env in envs:
        env.end_epoch()
        env.begin_epoch()


def test_one_step_gives_every_env_the_same_loss_gradients_and_parameters():
    a, b = _round("per-env"), _round("batched")
    _assert_same(a, b)
    _step(*a, 0)
    _step(*b, 0)
    _assert_same(a, b)


def test_lifecycle_changes_regroup_and_momentum_carries_over():
    a, b = _round("per-env"), _round("batched")
    for batch in range(2):
        _step(*a, batch)
        _step(*b, batch)
    _lifecycle(a[1])
    _lifecycle(b[1])
    assert a[1][1].model.slot("r0c1").pruning and a[1][3].model.slot("r0c2").stage is SeedStage.FOSSILIZED
    assert a[1][0].model.slot("r0c2").stage is SeedStage.TRAINING
    regroups = b[0].batched.regroups  # type: ignore[union-attr]
    for batch in range(2, 5):
        _step(*a, batch)
        _step(*b, batch)
        _assert_same(a, b)
    assert b[0].batched.regroups == regroups + 1  # type: ignore[union-attr]  # once, between epochs


def test_a_round_reports_the_same_per_env_figures_either_way():
    """A whole round, with its policy decisions, lifecycle and gradient telemetry: per-env accuracies
    agree within noise, and the batched path reports gradient health per env and scope as the per-env one."""
    results = {}
    for env_exec in ("per-env", "batched"):
        config = TrainConfig(device="cpu", n_envs=3, rounds=1, episode_length=5, policy="heuristic", log_every=0,
                             min_training_epochs=1, min_prune_age=1, embargo_epochs=1, gradient_telemetry_stride=4,
                             env_exec=env_exec)  # type: ignore[arg-type]
        hooks = RecordingHooks(TelemetryLevel.NORMAL)
        trainer = build_trainer(config, hooks)
        result = trainer.run_round(1)
        scopes = sorted({(env, p.scope) for env, p in hooks.of(GradientHealth) if p.scope != "policy"})
        epochs = [(env, p.accuracy) for env, p in hooks.of(EpochCompleted)]
        results[env_exec] = (result.final_accuracy, scopes, epochs)
    (acc_a, scopes_a, epochs_a), (acc_b, scopes_b, epochs_b) = results["per-env"], results["batched"]
    assert len(epochs_a) == len(epochs_b) == 3 * 5
    assert max(abs(x - y) for x, y in zip(acc_a, acc_b, strict=True)) < 0.1, (acc_a, acc_b)
    assert {s for _, s in scopes_a} >= {"host"} and scopes_a == scopes_b


def test_debug_gradient_collections_per_env_and_scope_match_the_per_env_loop():
    """At DEBUG, a collection reports gradient health and per-layer stats per (env, scope), the batched
    path from its flat buffers in one reduction each, with the per-env loop's names, order and values."""
    reported = {}
    for env_exec in ("per-env", "batched"):
        trainer, envs = _round(env_exec)
        hooks = RecordingHooks(TelemetryLevel.DEBUG)
        sites = SimicTelemetry(hooks)
        data = trainer.data
        if trainer.batched is None:
            for env in envs:
                env.train_step(data.train_x[:32], data.train_y[:32], True, True, sites)
        else:
            trainer.batched.prepare(envs)
            trainer.batched.train_step(data.train_x[:32], data.train_y[:32], True, True, sites)
        sites.flush_gradients()
        reported[env_exec] = ([(env, p) for env, p in hooks.of(GradientHealth)],
                              [(env, p) for env, p in hooks.of(DebugLayerStats)])
    (health_a, layers_a), (health_b, layers_b) = reported["per-env"], reported["batched"]
    assert [(e, p.scope, p.n_tensors) for e, p in health_a] == [(e, p.scope, p.n_tensors) for e, p in health_b]
    assert len(health_a) == 4 + 11  # every env's host and each of its training seeds
    for (_, a), (_, b) in zip(health_a, health_b, strict=True):
        assert a.global_norm == pytest.approx(b.global_norm, rel=1e-4)
        assert a.max_tensor_norm == pytest.approx(b.max_tensor_norm, rel=1e-4)
    assert [(e, p.model, [s.name for s in p.layers]) for e, p in layers_a] == \
        [(e, p.model, [s.name for s in p.layers]) for e, p in layers_b]
    for (_, a), (_, b) in zip(layers_a, layers_b, strict=True):
        for x, y in zip(a.layers, b.layers, strict=True):
            for field in ("grad_norm", "grad_mean", "grad_std", "grad_abs_max", "weight_norm"):
                assert getattr(x, field) == pytest.approx(getattr(y, field), rel=1e-3, abs=1e-7), (a.model, x.name)
            assert x.nonfinite == y.nonfinite


def test_debug_distributions_of_the_batched_envs_match_the_per_env_loop_in_one_transfer():
    """At DEBUG, the batched path sends each layer's gradient and weight distributions (from its flat buffers,
    binned on the device) under the per-env loop's names and in its order, with the same bins within float
    tolerance, all read with the collection's other figures in ONE transfer."""
    reported, syncs = {}, {}
    for env_exec in ("per-env", "batched"):
        trainer, envs = _round(env_exec)
        hooks = RecordingHooks(TelemetryLevel.DEBUG)
        sites = SimicTelemetry(hooks)
        x, y = trainer.data.train_x[:32], trainer.data.train_y[:32]
        if trainer.batched is not None:
            trainer.batched.prepare(envs)
        with HostSyncCounter(trainer.runtime.device) as counter:
            if trainer.batched is None:
                for env in envs:
                    env.train_step(x, y, True, True, sites)
            else:
                trainer.batched.train_step(x, y, True, True, sites)
            sites.flush_gradients()
        syncs[env_exec] = counter.by_call
        reported[env_exec] = [d for _, p in hooks.of(Histograms) for d in p.histograms]
    assert sum(syncs["batched"].values()) == 1, f"one transfer for the whole collection: {syncs['batched']}"
    a, b = reported["per-env"], reported["batched"]
    assert [d.name for d in a] == [d.name for d in b]
    tensors = sum(p.n_tensors for _, p in hooks.of(GradientHealth))  # every host's and training seed's layers
    assert len(b) == 2 * tensors == 172 and "debug/env2/r0c2/weights/body.down.weight" in {d.name for d in b}
    for x, y in zip(a, b, strict=True):
        assert (x.count, x.nonfinite) == (y.count, y.nonfinite), x.name
        assert x.min == pytest.approx(y.min, rel=1e-4, abs=1e-6) and x.max == pytest.approx(y.max, rel=1e-4, abs=1e-6)
        moved = sum(abs(i - j) for i, j in zip(x.bins, y.bins, strict=True)) / 2  # values that crossed a bin edge
        assert moved <= max(2, 0.01 * x.count), (x.name, x.bins, y.bins)
