"""The learning benchmark's controls and measurements (a sibling module of ``learning.py``).

- ``WaitPolicy`` (the host alone) and ``RandomPolicy`` (uniform over what the masks allow);
- ``widened``: the host widened, block by block, to a parameter count (the static control);
- ``graft``: a grown architecture present from the first epoch (the from-scratch control);
- ``FlopMeter``: training FLOPs, counted by ``torch.utils.flop_counter.FlopCounterMode`` on one
  forward and backward per architecture (cached), times the images trained in that architecture;
- ``Interval``: a mean with its sample SD and 95% CI (t distribution).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from leyline.esper import SeedStage
from trainer.kasmina.alpha import ALPHA_CURVES, AlphaController
from trainer.kasmina.blueprints import BLUEPRINT_NAMES, param_count
from trainer.kasmina.host import CNNHost, HostConfig
from trainer.kasmina.lifecycle import BLENDED_STAGES
from trainer.kasmina.slot import BLEND_STYLES
from trainer.simic.env import Env
from trainer.simic.vectorized import VectorizedTrainer
from trainer.tamiyo.actions import ALPHA_SPEEDS, ALPHA_TARGETS, TEMPOS, Action, Op
from trainer.tamiyo.features import EnvSignals

Arch = tuple[tuple[int, str, str], ...]
"""A grown network's seeds: (slot index, blueprint, blend style) of each seed in its forward pass."""


class WaitPolicy:
    """The host alone: never germinates anything."""

    def act(self, envs: Sequence[EnvSignals], op_mask: torch.Tensor, slot_mask: torch.Tensor) -> torch.Tensor:
        return torch.tensor([Action.row(Op.WAIT) for _ in envs], dtype=torch.long)


class RandomPolicy:
    """Uniform over the legal ops, then over the slots the op may target and every other head."""

    def __init__(self, seed: int) -> None:
        self.gen = torch.Generator().manual_seed(seed)

    def _pick(self, n: int) -> int:
        return int(torch.randint(n, (1,), generator=self.gen))

    def act(self, envs: Sequence[EnvSignals], op_mask: torch.Tensor, slot_mask: torch.Tensor) -> torch.Tensor:
        rows = []
        for e in range(len(envs)):
            ops = op_mask[e].nonzero().flatten().tolist()
            op = Op(ops[self._pick(len(ops))])
            slots = slot_mask[e, op].nonzero().flatten().tolist()
            rows.append(Action.row(
                op, slots[self._pick(len(slots))], BLUEPRINT_NAMES[self._pick(len(BLUEPRINT_NAMES))],
                BLEND_STYLES[self._pick(len(BLEND_STYLES))], TEMPOS[self._pick(len(TEMPOS))],
                ALPHA_TARGETS[self._pick(len(ALPHA_TARGETS))], ALPHA_SPEEDS[self._pick(len(ALPHA_SPEEDS))],
                ALPHA_CURVES[self._pick(len(ALPHA_CURVES))]))
        return torch.tensor(rows, dtype=torch.long)


# --- the static control: a wider host ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WideHost(HostConfig):
    """A host whose blocks have the given widths (not ``base_channels · 2^i``)."""

    widths: tuple[int, ...] = ()

    def channels(self, block: int) -> int:
        return self.widths[block] if self.widths else super().channels(block)


def host_params(config: HostConfig) -> int:
    return param_count(CNNHost(config))


def widened(base: HostConfig, target: int) -> WideHost:
    """``base`` widened one channel at a time, always in the block relatively narrowest so far (the
    widths keep their proportions), to the parameter count nearest ``target``."""
    n = base.n_blocks
    widths = [base.channels(i) for i in range(n)]
    best: tuple[int, tuple[int, ...]] | None = None
    while True:
        count = host_params(WideHost(**_fields(base), widths=tuple(widths)))
        if best is None or abs(count - target) < abs(best[0] - target):
            best = (count, tuple(widths))
        if count >= target:
            break
        narrowest = min(range(n), key=lambda i: widths[i] / base.channels(i))
        widths[narrowest] += 1
    return WideHost(**_fields(base), widths=best[1])


def _fields(config: HostConfig) -> dict:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(HostConfig)}


# --- the from-scratch control: the grown architecture from epoch 0 --------------------------------


def grown_arch(env: Env) -> Arch:
    """The seeds in the env's forward pass at the end of its episode."""
    return tuple((i, s.blueprint or "", s.seed.style) for i, s in enumerate(env.slots)
                 if s.seed is not None and s.stage in BLENDED_STAGES)


def graft(env: Env, arch: Arch) -> None:
    """Put ``arch``'s seeds into the fresh env as fossilized seeds at full alpha: they train with the
    host from its first epoch (at the seeds' learning rate, as grown seeds do)."""
    for index, blueprint, style in arch:
        slot = env.slots[index]
        slot.germinate(blueprint, style, TEMPOS[0], f"scratch-{index}", env.runtime.device)
        slot.stage = SeedStage.FOSSILIZED
        slot.alpha = AlphaController(alpha=1.0, target=1.0)


def graft_each_round(trainer: VectorizedTrainer, archs: dict[tuple[int, int], Arch]) -> None:
    """Every round's fresh env ``(round, env)`` starts with ``archs[(round, env)]``."""
    fresh = trainer.fresh_envs

    def grafted(round_: int) -> list[Env]:
        envs = fresh(round_)
        for env in envs:
            graft(env, archs[(round_, env.index)])
        return envs
    trainer.fresh_envs = grafted  # type: ignore[method-assign]


# --- training FLOPs --------------------------------------------------------------------------------


class FlopMeter:
    """Training FLOPs per (round, env): before each epoch trains, the FLOPs of one batch's forward and
    backward in the env's current architecture (counted once per architecture), per image, times the
    images of the epoch. Validation and counterfactual passes are not training and are left out."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y
        self.per_image: dict[tuple, float] = {}
        self.totals: dict[tuple[int, int], float] = {}

    def attach(self, trainer: VectorizedTrainer) -> None:
        inner = trainer.train_epoch

        def counted(envs: list[Env]) -> None:
            for env in envs:
                key = (env.round, env.index)
                self.totals[key] = self.totals.get(key, 0.0) + self.of(env) * trainer.data.n_train
            inner(envs)
        trainer.train_epoch = counted  # type: ignore[method-assign]

    def of(self, env: Env) -> float:
        host = env.model.host.config
        arch = tuple((s.slot_id, s.blueprint, s.stage is SeedStage.TRAINING, s.pruning, s.seed.style)
                     for s in env.slots if s.seed is not None and (s.trainable or s.pruning))
        key = (tuple(host.channels(i) for i in range(host.n_blocks)), arch)
        if key not in self.per_image:
            model = copy.deepcopy(env.model)
            with FlopCounterMode(display=False) as counter:
                F.cross_entropy(model(self.x), self.y).backward()
            self.per_image[key] = counter.get_total_flops() / self.x.shape[0]
        return self.per_image[key]


# --- statistics ------------------------------------------------------------------------------------

# Two-sided 95% quantiles of Student's t for 1..10 degrees of freedom; past 10, the Cornish-Fisher
# expansion around the normal quantile (within 0.001 of the exact value there).
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def t95(df: int) -> float:
    if df < 1:
        return math.nan
    if df <= len(_T95):
        return _T95[df - 1]
    z = 1.959964
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


@dataclasses.dataclass(frozen=True)
class Interval:
    """A mean with its sample SD and the half-width of its 95% CI (t distribution, n − 1 df)."""

    mean: float
    sd: float
    half: float
    n: int

    @classmethod
    def of(cls, xs: Sequence[float]) -> Interval:
        xs = list(xs)
        sd = statistics.stdev(xs) if len(xs) > 1 else math.nan
        return cls(statistics.fmean(xs), sd, t95(len(xs) - 1) * sd / math.sqrt(len(xs)), len(xs))

    @property
    def low(self) -> float:
        return self.mean - self.half

    @property
    def high(self) -> float:
        return self.mean + self.half

    def show(self, scale: float = 1.0, unit: str = "") -> str:
        return (f"{scale * self.mean:+.2f}{unit} (SD {scale * self.sd:.2f}, 95% CI "
                f"{scale * self.low:+.2f} to {scale * self.high:+.2f}, n={self.n})")


def paired(a: dict, b: dict, value: Callable[[object], float]) -> Interval:
    """The paired differences ``value(a[k]) − value(b[k])`` over the keys both have."""
    keys = sorted(set(a) & set(b))
    return Interval.of([value(a[k]) - value(b[k]) for k in keys])
