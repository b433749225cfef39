"""Payloads of the health collectors: gradient norms, per-layer statistics, anomalies."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from leyline.enums import EventKind, Kind
from leyline.payloads import Payload


class GradientHealth(Payload, kw_only=True, frozen=True):
    """Gradient norms of one scope (the host, a seed slot, or the policy) at one collection."""

    KIND: ClassVar[Kind] = EventKind.GRADIENT_HEALTH
    scope: str
    global_norm: float | None
    max_tensor_norm: float | None = None
    n_tensors: int = 0
    nonfinite: int = 0
    vanishing: bool = False
    exploding: bool = False
    ema_norm: float | None = None
    drift: float | None = None
    ratio: float | None = None


class AnomalyDetected(Payload, kw_only=True, frozen=True):
    """A detector fired; ``evidence`` holds the numbers it saw."""

    KIND: ClassVar[Kind] = EventKind.ANOMALY_DETECTED
    anomaly: str
    detail: str
    evidence: dict[str, float] = {}
    auto_escalated: bool = False
    rank: int | None = None
    """The rank the anomaly is about when it is not the rank that reports it (``straggler``)."""


class LayerStat(msgspec.Struct, kw_only=True, frozen=True):
    """Gradient and weight statistics of one parameter tensor."""

    name: str
    grad_norm: float
    grad_mean: float
    grad_std: float
    grad_abs_max: float
    weight_norm: float
    nonfinite: int = 0


class DebugLayerStats(Payload, kw_only=True, frozen=True):
    """Per-layer gradient statistics of one model, collected only at DEBUG."""

    KIND: ClassVar[Kind] = EventKind.DEBUG_LAYER_STATS
    model: str
    layers: list[LayerStat]
