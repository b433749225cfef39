"""The training hot path, per-env loop against batched envs, side by side in one invocation.

1. aten ops dispatched per env per training batch (a ``TorchDispatchMode`` counter: a
   device-independent count of kernel launches), over ``--op-batches`` batches of an epoch (the
   gradient-ratio measurement at its stride included), at the default CPU shape with live seeds,
   for each env count of ``--op-envs``;
2. host CPU time per env-batch at a launch-bound shape (``--tiny-width`` channels, batch
   ``--tiny-batch``): what the Python and the dispatcher cost around each kernel;
3. env-epochs/s of whole rounds (``run_round``, heuristic policy, NORMAL telemetry to null hooks)
   at the default CPU shape with ``--n-envs`` envs, the two modes alternating round by round:
   ``cpu_ratio`` is the median of the pairs' ratios, batched / per-env;
4. the largest difference of any env's parameters after ``--diff-steps`` batches from the same
   state, each way;
5. DEBUG's gradient collection alone (gradient health and per-layer statistics of every env and
   scope, launched, read back in one transfer and turned into events, to null hooks) in host CPU per
   env-batch: ``collect_env`` per env against ``collect_flat`` once;
6. how to batch: the hosts' forward and backward alone (no seeds, no optimizer) as
   ``torch.func.stack_module_state`` + ``vmap(functional_call)`` (PyTorch's model-ensembling
   recipe) against the grouped convolutions of ``trainer.kasmina.stacked`` (what the batched
   step runs): ops and host CPU time per env-batch at the default shape.

    python bench/hot_path.py [--n-envs 4] [--repeats 5] [--live-seeds 2]

Goals: ops per env-batch <= 0.35x the per-env loop's with 4 envs (<= 0.2x with 8); env-epochs/s
not lower than the per-env loop's. Last line: key=value pairs.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from leyline import TelemetryLevel
from trainer.build import build_trainer
from trainer.hooks import NullHooks
from trainer.simic.batched import FlatGradients
from trainer.simic.config import TrainConfig
from trainer.simic.diagnostics import with_live_seeds
from trainer.simic.env import Env
from trainer.simic.sites import NullSites
from trainer.simic.vectorized import VectorizedTrainer
from trainer.telemetry.sites import SimicTelemetry

MODES = ("per-env", "batched")


class OpCounter(TorchDispatchMode):
    """Counts every aten op that reaches the kernels (after autograd, views included)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.count += 1
        return func(*args, **(kwargs or {}))


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def ready(config: TrainConfig, mode: str, live_seeds: int) -> tuple[VectorizedTrainer, list[Env]]:
    """A round's fresh envs with ``live_seeds`` seeds each, past the epoch boundary that makes them TRAINING."""
    trainer = with_live_seeds(build_trainer(dataclasses.replace(config, env_exec=mode), NullHooks(TelemetryLevel.OFF)),
                              live_seeds)
    envs = trainer.envs = trainer.fresh_envs(1)
    for env in envs:
        env.begin_epoch()
    if trainer.batched is not None:
        trainer.batched.prepare(envs)
    return trainer, envs


def step(trainer: VectorizedTrainer, envs: list[Env], batch: int, measure: bool) -> None:
    data, size = trainer.data, trainer.batch_size
    start = (batch * size) % max(data.n_train - size + 1, 1)
    x, y = data.train_x[start: start + size], data.train_y[start: start + size]
    if trainer.batched is not None:
        trainer.batched.train_step(x, y, measure, False, NullSites())
    else:
        for env in envs:
            env.train_step(x, y, measure, False, NullSites())


def ops_per_env_batch(config: TrainConfig, mode: str, live_seeds: int, batches: int) -> float:
    trainer, envs = ready(config, mode, live_seeds)
    step(trainer, envs, 0, True)  # first steps out of the count (optimizer state, allocator)
    counter = OpCounter()
    with counter:
        for b in range(batches):
            step(trainer, envs, b + 1, b % config.gradient_telemetry_stride == 0)
    return counter.count / (batches * config.n_envs)


def cpu_us_per_env_batch(config: TrainConfig, live_seeds: int, batches: int, repeats: int) -> dict[str, float]:
    """Median host CPU time per env-batch of each mode, alternating."""
    times: dict[str, list[float]] = {m: [] for m in MODES}
    made = {m: ready(config, m, live_seeds) for m in MODES}
    for m in MODES:
        step(*made[m], 0, True)
    for r in range(repeats):
        for m in MODES if r % 2 == 0 else MODES[::-1]:
            c0 = time.process_time()
            for b in range(batches):
                step(*made[m], b + 1, b % config.gradient_telemetry_stride == 0)
            times[m].append((time.process_time() - c0) / (batches * config.n_envs) * 1e6)
    return {m: statistics.median(t) for m, t in times.items()}


def env_epochs_per_s(config: TrainConfig, live_seeds: int, repeats: int) -> tuple[dict[str, list[float]], list[float]]:
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    trainers = {m: with_live_seeds(build_trainer(dataclasses.replace(config, env_exec=m),
                                                 NullHooks(TelemetryLevel.NORMAL)), live_seeds) for m in MODES}
    for m in MODES:
        trainers[m].run_round(1)  # warm-up
    for r in range(repeats):
        for m in MODES if r % 2 == 0 else MODES[::-1]:
            t0 = time.perf_counter()
            trainers[m].run_round(r + 2)
            rates[m].append(config.n_envs * config.episode_length / (time.perf_counter() - t0))
    ratios = [b / p for b, p in zip(rates["batched"], rates["per-env"], strict=True)]
    return rates, ratios


def max_abs_diff(config: TrainConfig, live_seeds: int, steps: int) -> float:
    made = {}
    for m in MODES:
        torch.manual_seed(0)
        made[m] = ready(config, m, live_seeds)
    for b in range(steps):
        for m in MODES:
            step(*made[m], b, b % config.gradient_telemetry_stride == 0)
    with torch.no_grad():
        return _worst(made["per-env"][1], made["batched"][1])


def _worst(per_env: list[Env], batched: list[Env]) -> float:
    worst = 0.0
    for env_a, env_b in zip(per_env, batched, strict=True):
        for pa, pb in zip(env_a.model.parameters(), env_b.model.parameters(), strict=True):
            worst = max(worst, float((pa - pb).abs().max()))
        worst = max(worst, float((env_a.train_loss_sum - env_b.train_loss_sum).abs()))
    return worst


def debug_collection_us(config: TrainConfig, live_seeds: int, batches: int, repeats: int) -> dict[str, float]:
    """Host CPU per env-batch of one DEBUG gradient collection and its flush, each mode, alternating."""
    made = {}
    for m in MODES:
        trainer, envs = ready(config, m, live_seeds)
        step(trainer, envs, 0, True)  # gradients to collect
        made[m] = (trainer, envs, SimicTelemetry(NullHooks(TelemetryLevel.DEBUG)))

    def collect(m: str) -> None:
        trainer, envs, sites = made[m]
        if trainer.batched is not None:
            assert trainer.batched.layout is not None
            sites.collect_flat(FlatGradients(trainer.batched.layout))
        else:
            for env in envs:
                sites.collect_env(env.index, env.gradient_scopes())
        sites.flush_gradients()

    times: dict[str, list[float]] = {m: [] for m in MODES}
    for m in MODES:
        collect(m)
    for r in range(repeats):
        for m in MODES if r % 2 == 0 else MODES[::-1]:
            c0 = time.process_time()
            for _ in range(batches):
                collect(m)
            times[m].append((time.process_time() - c0) / (batches * config.n_envs) * 1e6)
    return {m: statistics.median(t) for m, t in times.items()}


def host_variants(config: TrainConfig, batches: int) -> dict[str, tuple[float, float]]:
    """(ops, CPU us) per env-batch of the hosts' forward and backward: vmap against grouped convolutions."""
    trainer, envs = ready(config, "batched", 0)
    batched = trainer.batched
    assert batched is not None
    hosts = [env.model.host for env in envs]
    params, buffers = torch.func.stack_module_state(hosts)  # type: ignore[arg-type]
    skeleton = copy.deepcopy(hosts[0]).to("meta")

    def one(p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(skeleton, (p, b), (x,))

    ensemble = torch.vmap(one, in_dims=(0, 0, None))
    n, x, y = config.n_envs, trainer.data.train_x[: config.batch_size], trainer.data.train_y[: config.batch_size]

    def vmapped() -> None:
        logits = ensemble(params, buffers, x)
        F.cross_entropy(logits.reshape(n * x.shape[0], -1), y.repeat(n), reduction="none").view(n, -1).mean(1) \
            .sum().backward()

    def grouped() -> None:
        batched.losses(x, y).sum().backward()

    out = {}
    for name, fn in (("vmap", vmapped), ("grouped", grouped)):
        fn()
        counter = OpCounter()
        with counter:
            fn()
        c0 = time.process_time()
        for _ in range(batches):
            fn()
        out[name] = (counter.count / n, (time.process_time() - c0) / (batches * n) * 1e6)
    return out


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-envs", type=int, default=4, help="envs of the throughput and CPU-time figures")
    p.add_argument("--op-envs", default="4,8", help="env counts of the op figures, comma-separated")
    p.add_argument("--live-seeds", type=int, default=2,
                   help="seeds germinated in every env (default %(default)s: both slots)")
    p.add_argument("--repeats", type=int, default=5, help="rounds (and CPU-time runs) of each mode, alternating")
    p.add_argument("--episode-length", type=int, default=12)
    p.add_argument("--op-batches", type=int, default=10)
    p.add_argument("--cpu-batches", type=int, default=40)
    p.add_argument("--tiny-width", type=int, default=1, help="--base-channels of the launch-bound shape")
    p.add_argument("--tiny-batch", type=int, default=8, help="--batch-size of the launch-bound shape")
    p.add_argument("--diff-steps", type=int, default=5)
    p.add_argument("--train-size", type=int, default=None, help="training images (default: the config's)")
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    torch.set_num_threads(args.threads)
    over = {} if args.train_size is None else {"train_size": args.train_size}
    base = TrainConfig(device="cpu", n_envs=args.n_envs, policy="heuristic", log_every=0,
                       episode_length=args.episode_length, **over)  # type: ignore[arg-type]
    ops: dict[int, dict[str, float]] = {}
    for n in (int(v) for v in args.op_envs.split(",")):
        cfg = dataclasses.replace(base, n_envs=n)
        ops[n] = {m: ops_per_env_batch(cfg, m, args.live_seeds, args.op_batches) for m in MODES}
        _say(f"{n} envs: aten ops per env-batch per-env {ops[n]['per-env']:.1f}, batched {ops[n]['batched']:.1f}, "
             f"ratio {ops[n]['batched'] / ops[n]['per-env']:.3f}")
    tiny = dataclasses.replace(base, base_channels=args.tiny_width, batch_size=args.tiny_batch)
    cpu = cpu_us_per_env_batch(tiny, args.live_seeds, args.cpu_batches, args.repeats)
    _say(f"launch-bound shape (width {args.tiny_width}, batch {args.tiny_batch}): host CPU per env-batch "
         f"per-env {cpu['per-env']:.0f} us, batched {cpu['batched']:.0f} us")
    rates, ratios = env_epochs_per_s(base, args.live_seeds, args.repeats)
    for m in MODES:
        _say(f"default shape, {args.n_envs} envs: {m:8s} env-epochs/s " + " ".join(f"{r:.2f}" for r in rates[m]))
    diff = max_abs_diff(base, args.live_seeds, args.diff_steps)
    debug = debug_collection_us(base, args.live_seeds, args.cpu_batches, args.repeats)
    _say(f"DEBUG gradient collection, host CPU per env-batch: per-env {debug['per-env']:.0f} us, "
         f"batched {debug['batched']:.0f} us")
    variants = host_variants(base, args.cpu_batches)
    for name, (n_ops, us) in variants.items():
        _say(f"hosts' forward+backward as {name:8s}: {n_ops:.1f} ops, {us:.0f} us CPU per env-batch")
    main_ops = ops.get(args.n_envs) or next(iter(ops.values()))
    fields: dict[str, object] = {
        "envs": args.n_envs,
        "ops_per_env_batch_per_env": f"{main_ops['per-env']:.1f}",
        "ops_per_env_batch_batched": f"{main_ops['batched']:.1f}",
        "ops_ratio": f"{main_ops['batched'] / main_ops['per-env']:.3f}",
        "cpu_ratio": f"{statistics.median(ratios):.3f}",
        "max_abs_diff": f"{diff:.2e}",
        "cpu_us_per_env_batch_per_env": f"{cpu['per-env']:.1f}",
        "cpu_us_per_env_batch_batched": f"{cpu['batched']:.1f}",
        "host_cpu_ratio": f"{cpu['batched'] / cpu['per-env']:.3f}",
        "env_epochs_per_s_per_env": f"{statistics.median(rates['per-env']):.2f}",
        "env_epochs_per_s_batched": f"{statistics.median(rates['batched']):.2f}",
    }
    for n, o in ops.items():
        fields[f"ops_ratio_{n}envs"] = f"{o['batched'] / o['per-env']:.3f}"
    fields["debug_collect_us_per_env_batch_per_env"] = f"{debug['per-env']:.1f}"
    fields["debug_collect_us_per_env_batch_batched"] = f"{debug['batched']:.1f}"
    for name, (n_ops, us) in variants.items():
        fields[f"host_fwd_bwd_ops_{name}"] = f"{n_ops:.1f}"
        fields[f"host_fwd_bwd_cpu_us_{name}"] = f"{us:.0f}"
    print(" ".join(f"{k}={v}" for k, v in fields.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
