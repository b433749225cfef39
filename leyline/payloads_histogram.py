"""Distributions over time: the values of a tensor at a step, in fixed bins (TensorBoard's histograms).

One ``histogram`` event holds every distribution one collection took (``run.log`` of ``nissa.Histogram``
values, or ``run.watch(model, histograms=…)``'s every layer): compact, ``len(bins)`` counts of equal width from
``min`` to ``max``. Read per name at ``GET /runs/{run_id}/histograms/{name}``; their ``min``, ``max`` and
``count`` are series too (``histogram.histograms.max{histogram=<name>,rank=0}``), the bins are not.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from leyline.enums import EventKind
from leyline.metrics import MAX_LABELS, LabelValue, MetricName
from leyline.payloads import Payload

MAX_BINS = 512
"""Bins one distribution may have."""
DEFAULT_BINS = 64
"""Bins of a distribution when none are asked for (``nissa.Histogram``, ``run.watch``, the TensorBoard drop-in and
importer)."""
MAX_DISTRIBUTIONS = 1024
"""Distributions one event may hold (a model's every layer)."""


class Distribution(msgspec.Struct, kw_only=True, frozen=True):
    """One tensor's values: ``bins[i]`` of them in ``[min + i * w, min + (i + 1) * w)``, ``w = (max - min) /
    len(bins)`` (the last bin holds ``max``); NaN and infinities counted apart in ``nonfinite``."""

    name: MetricName
    """What the values are (``weights/fc1``, ``gradients/layer1.0.conv.weight``)."""
    min: float | None
    """The smallest finite value; None when there is none."""
    max: float | None
    count: int
    """Finite values (the sum of ``bins``)."""
    nonfinite: int = 0
    bins: Annotated[list[int], msgspec.Meta(min_length=1, max_length=MAX_BINS)]


class Histograms(Payload, kw_only=True, frozen=True):
    """Distributions of the run at the envelope's ``step``, with optional labels like ``metrics``'."""

    KIND: ClassVar[EventKind] = EventKind.HISTOGRAM
    histograms: Annotated[list[Distribution], msgspec.Meta(min_length=1, max_length=MAX_DISTRIBUTIONS)]
    labels: Annotated[dict[MetricName, LabelValue], msgspec.Meta(max_length=MAX_LABELS)] = {}


QUANTILES: tuple[float, ...] = (0.0, 0.07, 0.16, 0.31, 0.5, 0.69, 0.84, 0.93, 1.0)
"""The percentiles a distribution chart draws as bands (TensorBoard's: min, ±1.5σ, ±1σ, ±0.5σ of a normal, median)."""


def quantiles(d: Distribution, qs: tuple[float, ...] = QUANTILES) -> list[float] | None:
    """The values below which each share ``qs`` of ``d``'s finite values lie, interpolated linearly within a bin;
    None without a finite value."""
    if d.min is None or d.max is None or d.count <= 0:
        return None
    width = (d.max - d.min) / len(d.bins)
    out = []
    for q in qs:
        target, seen = q * d.count, 0.0
        value = d.max
        for i, n in enumerate(d.bins):
            if n and seen + n >= target:
                value = d.min + width * (i + (target - seen) / n)
                break
            seen += n
        out.append(min(max(value, d.min), d.max))
    return out


class HistogramAt(msgspec.Struct):
    """One distribution at one step of one rank: ``bins`` of equal width from ``min`` to ``max``."""

    rank: int
    step: int
    epoch: int
    ts: float
    min: float | None
    max: float | None
    count: int
    nonfinite: int
    bins: list[int]
    quantiles: list[float] | None
    """The values at ``QUANTILES`` (0, 7, 16, 31, 50, 69, 84, 93 and 100%) of the finite ones: the bands a
    distribution chart draws; None without a finite value."""


class HistogramsReply(msgspec.Struct):
    """``GET /runs/{run_id}/histograms/{name}``: one name's distributions over the run's steps."""

    name: str
    quantiles: list[float]
    """The shares each histogram's ``quantiles`` are at."""
    histograms: list[HistogramAt]
    """In step order per rank, ranks in turn; at most ``max_steps`` a rank, evenly spread over the run."""
    taken: int
    """Distributions of the name the run holds (before downsampling)."""
