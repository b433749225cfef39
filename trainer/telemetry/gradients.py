"""Gradient health of one scope (the host, a seed slot, the policy): batched, one sync.

``collect_gradients`` launches one batched norm over every gradient of a scope and
returns a ``PendingGradients`` without waiting for the device; ``resolve()`` is the one
device-to-host transfer (a single ``.tolist()`` of the stacked per-tensor norms).

Numerics. The per-tensor L2 norms are taken by ``torch._foreach_norm`` with ``dtype``
float32 (float64 for float64 gradients): half and bfloat16 gradients are accumulated in
float32 instead of squaring in their own precision, where ``g * g`` overflows past
|g| = 256 in float16. Nothing is concatenated: the only temporaries are one scalar per
tensor. The global norm is the L2 norm of the per-tensor norms (exactly the norm of all
gradients concatenated), taken with ``math.hypot``, which scales instead of squaring.
A float32 norm can still overflow when a tensor's sum of squares passes 3.4e38; such a
tensor is measured again in float64 at ``resolve`` time, so that ``nonfinite`` counts
only tensors holding NaN or Inf. That second pass reads the gradients again: resolve
before they are zeroed in place (``zero_grad(set_to_none=True)``, the default, is safe).

``torch._foreach_norm`` is the private kernel behind ``torch.nn.utils.clip_grad_norm_``;
its ``dtype`` argument needs torch 2.4, the project's minimum.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from leyline import GradientHealth

MIN_TORCH_VERSION = (2, 4)


@dataclass(frozen=True)
class GradientThresholds:
    """When a scope's global gradient norm counts as vanishing or exploding."""

    vanishing: float = 1e-7
    """Below this global L2 norm the gradients are vanishing."""
    exploding: float = 100.0
    """Above this global L2 norm the gradients are exploding."""

    def __post_init__(self) -> None:
        if not (0.0 <= self.vanishing < self.exploding):
            raise ValueError(f"need 0 <= vanishing < exploding, got {self.vanishing} and {self.exploding}")


@dataclass(frozen=True)
class GradientStats:
    """Resolved gradient norms of one scope; ``global_norm`` is None when nothing was measured.

    ``nonfinite`` counts tensors holding NaN or Inf; then ``global_norm`` is NaN and the
    scope counts as exploding (an Inf gradient is the limit of one).
    """

    scope: str
    global_norm: float | None
    max_tensor_norm: float | None
    n_tensors: int
    n_params: int
    nonfinite: int
    vanishing: bool
    exploding: bool

    @property
    def finite(self) -> bool:
        return self.nonfinite == 0

    def payload(self, *, ema_norm: float | None = None, drift: float | None = None,
                ratio: float | None = None) -> GradientHealth:
        """As a ``gradient_health`` payload; non-finite numbers travel as None (JSON has no NaN)."""
        return GradientHealth(scope=self.scope, global_norm=self.global_norm if self.finite else None,
                              max_tensor_norm=self.max_tensor_norm, n_tensors=self.n_tensors,
                              nonfinite=self.nonfinite, vanishing=self.vanishing, exploding=self.exploding,
                              ema_norm=ema_norm, drift=drift, ratio=ratio)


def _accumulate_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


class PendingGradients:
    """Norms launched on the device and not read yet; ``resolve()`` is the single sync."""

    def __init__(self, scope: str, grads: list[torch.Tensor], norms: torch.Tensor | None,
                 thresholds: GradientThresholds) -> None:
        self.scope = scope
        self._grads = grads
        self._norms = norms
        self._thresholds = thresholds
        self._resolved: GradientStats | None = None

    def resolve(self) -> GradientStats:
        """Read the norms (one transfer) and derive the scope's health; idempotent."""
        if self._resolved is None:
            norms = self._norms.tolist() if self._norms is not None else []
            self._resolved = self._summarise(self._redo_overflowed(norms))
            self._grads = []
            self._norms = None
        return self._resolved

    def _redo_overflowed(self, norms: list[float]) -> list[float]:
        # Only a tensor whose float32 norm came back infinite is measured again, in float64.
        for i, value in enumerate(norms):
            if math.isinf(value) and self._grads[i].dtype != torch.float64:
                norms[i] = float(torch.linalg.vector_norm(self._grads[i], dtype=torch.float64))
        return norms

    def _summarise(self, norms: list[float]) -> GradientStats:
        n_params = sum(g.numel() for g in self._grads)
        finite = [v for v in norms if math.isfinite(v)]
        nonfinite = len(norms) - len(finite)
        if not norms:
            return GradientStats(scope=self.scope, global_norm=None, max_tensor_norm=None, n_tensors=0,
                                 n_params=0, nonfinite=0, vanishing=False, exploding=False)
        global_norm = math.hypot(*norms) if nonfinite == 0 else math.nan
        t = self._thresholds
        return GradientStats(
            scope=self.scope, global_norm=global_norm, max_tensor_norm=max(finite) if finite else None,
            n_tensors=len(norms), n_params=n_params, nonfinite=nonfinite,
            vanishing=nonfinite == 0 and global_norm < t.vanishing,
            exploding=nonfinite > 0 or global_norm > t.exploding,
        )


@torch.compiler.disable
def collect_gradients(scope: str, params: Iterable[torch.nn.Parameter | torch.Tensor],
                      thresholds: GradientThresholds | None = None) -> PendingGradients:
    """Launch the per-tensor norms of every gradient in ``params``; no sync happens here.

    Kept out of compiled graphs: the parameter list is dynamic (seeds come and go).
    """
    thresholds = thresholds or GradientThresholds()
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return PendingGradients(scope, [], None, thresholds)
    by_dtype: dict[torch.dtype, list[int]] = {}
    for i, g in enumerate(grads):
        by_dtype.setdefault(g.dtype, []).append(i)
    if len(by_dtype) == 1:
        (dtype,) = by_dtype
        stacked = torch.stack(torch._foreach_norm(grads, 2, dtype=_accumulate_dtype(dtype)))
    else:
        # Mixed dtypes (a float32 head on a bf16 trunk): one launch per dtype, then back in order.
        stacked = torch.empty(len(grads), dtype=torch.float64, device=grads[0].device)
        for dtype, idx in by_dtype.items():
            part = torch._foreach_norm([grads[i] for i in idx], 2, dtype=_accumulate_dtype(dtype))
            stacked[torch.tensor(idx, device=stacked.device)] = torch.stack(part).to(torch.float64)
    return PendingGradients(scope, grads, stacked.detach(), thresholds)


def seed_gradient_ratio(seed: GradientStats, host: GradientStats, *, clamp: float = 10.0) -> float | None:
    """``(|g_seed| / |g_host|) * sqrt(P_host / P_seed)``, clamped: a seed's share of learning signal.

    Scaling by the parameter counts compares a small seed with a large host per parameter.
    None when either side was not measured or is not finite, or the host norm is zero.
    """
    if seed.global_norm is None or host.global_norm is None or not (seed.finite and host.finite):
        return None
    if host.global_norm <= 0.0 or seed.n_params == 0:
        return None
    ratio = (seed.global_norm / host.global_norm) * math.sqrt(host.n_params / seed.n_params)
    return min(ratio, clamp)


def resolve_all(pending: list[PendingGradients]) -> list[GradientStats]:
    """Resolve many collections with ONE transfer: their norms are concatenated on the device first."""
    live = [p for p in pending if p._resolved is None and p._norms is not None]
    if len(live) > 1 and len({p._norms.device for p in live}) == 1:
        values = torch.cat([p._norms.to(torch.float64) for p in live]).tolist()
        offset = 0
        for p in live:
            n = p._norms.numel()
            p._resolved = p._summarise(p._redo_overflowed(values[offset: offset + n]))
            p._grads, p._norms = [], None
            offset += n
    return [p.resolve() for p in pending]
