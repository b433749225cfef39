"""Distributions over time: the values of a tensor at a step, in fixed bins (TensorBoard's histograms).

One ``histogram`` event holds every distribution one collection took (``run.log`` of ``nissa.Histogram``
values, or ``run.watch(model, histograms=…)``'s every layer): compact, ``len(bins)`` counts of equal width from
``min`` to ``max``. Read per name at ``GET /runs/{run_id}/histograms/{name}``; their ``min``, ``max`` and
``count`` are series too (``histogram.histograms.max{histogram=<name>,rank=0}``), the bins are not.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable
from typing import Annotated, ClassVar

import msgspec

from leyline.enums import EventKind, Kind
from leyline.metrics import MAX_LABELS, LabelValue, MetricName
from leyline.payloads import MAX_INT, Payload

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
    """Distributions of the run at the envelope's ``step``, with optional labels like ``metrics``'. Each one is a
    distribution (``distribution_problem``), no two of one name (``one_a_name``): a read's ``max_steps`` counts
    one a step."""

    KIND: ClassVar[Kind] = EventKind.HISTOGRAM
    histograms: Annotated[list[Distribution], msgspec.Meta(min_length=1, max_length=MAX_DISTRIBUTIONS)]
    labels: Annotated[dict[MetricName, LabelValue], msgspec.Meta(max_length=MAX_LABELS)] = {}

    def __post_init__(self) -> None:
        for i, d in enumerate(self.histograms):
            why = distribution_problem(d)
            if why is not None:
                raise ValueError(f"histograms[{i}] ({d.name!r}): {why}")


def second_name(payload: object) -> str | None:
    """Where ``payload``, a new event's, holds a second distribution of one name, in words (None: it does not). Checked
    at ingest, not as it decodes: an event stored before the rule (two watched models' layers) still reads."""
    if not isinstance(payload, Histograms):
        return None
    names: set[str] = set()
    for i, d in enumerate(payload.histograms):
        if d.name in names:
            return f"histograms[{i}] ({d.name!r}): a second distribution of that name: an event holds one of each name"
        names.add(d.name)
    return None


def one_a_name(distributions: Iterable[Distribution]) -> list[Distribution]:
    """``distributions`` less each one after the first of its name: what one ``Histograms`` may hold (two watched
    models' layers, or names cut at their length limit, may meet)."""
    first: dict[str, Distribution] = {}
    for d in distributions:
        first.setdefault(d.name, d)
    return list(first.values())


def distribution_problem(d: Distribution) -> str | None:
    """What makes ``d`` no distribution, in words (None: it is one): ``min`` and ``max`` finite with ``min <=
    max`` and ``max - min`` finite (or both null, with no finite value), each bin and ``nonfinite`` from 0 to
    2⁶³−1, ``count`` the sum of the bins."""
    if d.min is None or d.max is None:
        if d.min is not None or d.max is not None:
            return "min and max are both numbers or both null"
        if d.count or any(d.bins):
            return "without min and max it holds no finite value: count 0 and every bin 0"
    elif not (math.isfinite(d.min) and math.isfinite(d.max)):
        return f"min and max must be finite numbers, not {d.min!r} and {d.max!r}"
    elif d.min > d.max:
        return f"min {d.min!r} is above max {d.max!r}"
    elif not math.isfinite(d.max - d.min):  # its bins' width, edges and quantiles would be infinite or NaN
        return f"max - min must be finite, not {d.max!r} - {d.min!r}"
    low, high = min(d.bins), max(d.bins)
    if low < 0 or high > MAX_INT:
        bad = low if low < 0 else high
        return f"bin {d.bins.index(bad)} counts {bad}: a bin counts 0 to 2^63-1"
    if not 0 <= d.nonfinite <= MAX_INT:
        return f"nonfinite {d.nonfinite}: it counts 0 to 2^63-1"
    if d.count > MAX_INT:
        return f"count {d.count}: it counts 0 to 2^63-1"
    if d.count != sum(d.bins):
        return f"count {d.count} is not the sum of its bins ({sum(d.bins)}): count is the finite values, all binned"
    return None


QUANTILES: tuple[float, ...] = (0.0, 0.07, 0.16, 0.31, 0.5, 0.69, 0.84, 0.93, 1.0)
"""The percentiles a distribution chart draws as bands (TensorBoard's: min, ±1.5σ, ±1σ, ±0.5σ of a normal, median)."""


def quantiles(d: Distribution, qs: tuple[float, ...] = QUANTILES) -> list[float] | None:
    """The values below which each share ``qs`` of ``d``'s finite values lie, interpolated linearly within a bin;
    None without a finite value."""
    if d.min is None or d.max is None or d.count <= 0:
        return None
    width = (d.max - d.min) / len(d.bins)
    cumulative = list(itertools.accumulate(d.bins))
    out = []
    for q in qs:
        target = q * d.count
        # The first bin that holds values and reaches the target (a bisection: a read returns hundreds of these).
        i = bisect.bisect_left(cumulative, target) if target > 0 else bisect.bisect_right(cumulative, 0)
        value = d.max
        if i < len(cumulative):
            n = d.bins[i]
            value = d.min + width * (i + (target - (cumulative[i] - n)) / n)
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


HISTOGRAM_COUNTS = "histogram.histograms.count"
"""The series each distribution's count makes, labelled with its name (``histogram=<name>``): how a run's
distribution names are found."""
DEBUG_PREFIX = "debug/"
"""A debug window's per-layer distributions (``debug/<model>/gradients/<layer>``): after a loop's own."""


def distribution_order(name: str) -> tuple[bool, str]:
    """The one order of a run's distributions, the web page's and the console's: a loop's own (``run.log`` of
    a ``nissa.Histogram``, ``run.watch``) first, a debug window's after them, each by name."""
    return name.startswith(DEBUG_PREFIX), name


class DistributionNames(msgspec.Struct):
    """``GET /runs/{run_id}/histograms``: a page of a run's distribution names, in ``distribution_order``."""

    names: list[str]
    total: int
    """Names that match the filter, in all (``names`` is the page of them asked for)."""
