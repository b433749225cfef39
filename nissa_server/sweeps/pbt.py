"""Population-based training's two decisions, as pure functions: who copies whom (exploit), and the values
the copy goes on with (explore). The server applies them to live processes through commands (``service``)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from leyline.sweeps import Parameter, SweepSpec, Value


@dataclass(frozen=True)
class Member:
    """A live trial of the population as last reported."""

    trial_id: int
    metric: float
    step: int


def quantiles(spec: SweepSpec, population: Sequence[Member]) -> tuple[list[int], list[int]]:
    """The trial ids of the top and of the bottom ``quantile`` of ``population`` by the sweep's metric (at
    least one each; none when fewer than two members report a finite value)."""
    ranked = [m for m in population if math.isfinite(m.metric)]
    if len(ranked) < 2:
        return [], []
    ranked.sort(key=lambda m: m.metric, reverse=spec.metric.goal == "maximize")
    n = max(1, int(len(ranked) * spec.pbt_settings.quantile))
    return [m.trial_id for m in ranked[:n]], [m.trial_id for m in ranked[-n:]]


def choose_source(spec: SweepSpec, population: Sequence[Member], trial_id: int, rng: random.Random) -> int | None:
    """The trial ``trial_id`` copies, when it lies in the bottom quantile (else None)."""
    top, bottom = quantiles(spec, population)
    if trial_id not in bottom or trial_id in top:
        return None
    return rng.choice(top)


def sample(p: Parameter, rng: random.Random) -> Value:
    """A value drawn anew from the parameter's range or list."""
    if p.values is not None:
        return rng.choice(p.values)
    assert p.min is not None and p.max is not None
    if p.log:
        return p.clip(math.exp(rng.uniform(math.log(p.min), math.log(p.max))))
    return p.clip(rng.uniform(p.min, p.max))


def explore(spec: SweepSpec, params: Mapping[str, Value], rng: random.Random) -> dict[str, Value]:
    """The copied values, each perturbed (a range: times one of ``perturb``'s factors; a list: a neighbour) or,
    with probability ``resample``, drawn anew."""
    settings = spec.pbt_settings
    out: dict[str, Value] = {}
    for name, p in spec.parameters.items():
        value = params.get(name)
        if value is None or rng.random() < settings.resample:
            out[name] = sample(p, rng)
        elif p.values is not None:
            at = p.values.index(value) if value in p.values else 0
            out[name] = p.values[min(max(at + rng.choice((-1, 1)), 0), len(p.values) - 1)]
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = p.clip(float(value) * rng.choice(settings.perturb))
        else:
            out[name] = sample(p, rng)
    return out


def next_check(step: int, interval: int) -> int:
    """The first multiple of ``interval`` after ``step``."""
    return (step // interval + 1) * interval
