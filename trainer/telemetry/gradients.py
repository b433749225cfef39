"""Gradient health of one scope (the host, a seed slot, the policy): batched, one sync.

``collect_gradients`` launches one batched norm over every gradient of a scope and
returns a ``PendingGradients`` without waiting for the device; ``resolve()`` is the one
device-to-host transfer (a single ``.tolist()`` of the stacked per-tensor norms), and
``resolve_all`` reads many collections in one transfer (``telemetry.readback``).

Numerics. The per-tensor L2 norms are taken by ``torch._foreach_norm`` accumulating in
float64 (``dtype=torch.float64``), whatever the gradients' dtype: no sum of squares of
float32, float16 or bfloat16 values can overflow it, and nothing is concatenated (the
only temporaries are one scalar per tensor). The global norm is the L2 norm of the
per-tensor norms (exactly the norm of all gradients concatenated), taken with
``math.hypot``, which scales instead of squaring. So a huge but finite gradient gets its
true norm, and ``nonfinite`` counts only tensors holding NaN or Inf.

Everything is measured at launch: the loop clips the gradients in place right after
collecting them (``clip_grad_norm_`` scales them by max_norm / total norm, which is 0
when that norm overflows), and the read happens later, once every env has stepped.
Nothing at ``resolve`` time looks at the gradients again.

Streams. The norms are launched on the caller's current stream (an env's stream in the
loop) and read from another: each collection carries a ``StreamFence`` that the read
waits on first (on the device, no host sync).

``torch._foreach_norm`` is the private kernel behind ``torch.nn.utils.clip_grad_norm_``;
its ``dtype`` argument needs torch 2.4, the project's minimum.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from leyline import GradientHealth
from nissa.parts import DeviceFigures, read_all


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


class PendingGradients(DeviceFigures):
    """Norms launched on the device and not read yet; ``resolve()`` is the single sync."""

    def __init__(self, scope: str, norms: torch.Tensor | None, n_params: int,
                 thresholds: GradientThresholds) -> None:
        super().__init__(norms)
        self.scope = scope
        self.n_params = n_params
        self._thresholds = thresholds
        self._resolved: GradientStats | None = None

    @property
    def unread(self) -> bool:
        """Launched norms wait to be read (False once resolved, or when there were no gradients)."""
        return self._values is not None

    def absorb(self, values: list[float]) -> None:
        self._resolved = self._summarise(values)
        self._values = None  # read: the norms are let go

    def resolve(self) -> GradientStats:
        """Read the norms (one transfer) and derive the scope's health; idempotent."""
        if self._resolved is None:
            if self._values is None:
                self.absorb([])
            else:
                read_all([self])
        assert self._resolved is not None
        return self._resolved

    def _summarise(self, norms: list[float]) -> GradientStats:
        finite = [v for v in norms if math.isfinite(v)]
        nonfinite = len(norms) - len(finite)
        if not norms:
            return GradientStats(scope=self.scope, global_norm=None, max_tensor_norm=None, n_tensors=0,
                                 n_params=0, nonfinite=0, vanishing=False, exploding=False)
        global_norm = math.hypot(*norms) if nonfinite == 0 else math.nan
        t = self._thresholds
        return GradientStats(
            scope=self.scope, global_norm=global_norm, max_tensor_norm=max(finite) if finite else None,
            n_tensors=len(norms), n_params=self.n_params, nonfinite=nonfinite,
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
        return PendingGradients(scope, None, 0, thresholds)
    by_dtype: dict[torch.dtype, list[int]] = {}
    for i, g in enumerate(grads):
        by_dtype.setdefault(g.dtype, []).append(i)
    norms: dict[int, torch.Tensor] = {}
    # One launch per dtype (a float32 head on a bf16 trunk), put back in parameter order on the host
    # side: no index tensor is copied to the device.
    for idx in by_dtype.values():
        norms.update(zip(idx, torch._foreach_norm([grads[i] for i in idx], 2, dtype=torch.float64), strict=True))
    stacked = torch.stack([norms[i] for i in range(len(grads))]).detach()
    return PendingGradients(scope, stacked, sum(g.numel() for g in grads), thresholds)


def env_scope(env: int, scope: str) -> str:
    """One env's scope as one key (``env0/host``): its gradient average, its debug distributions' model."""
    return f"env{env}/{scope}"


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
    """Resolve many collections with ONE transfer (each collection's fence waited on first)."""
    read_all([p for p in pending if p.unread])
    return [p.resolve() for p in pending]
