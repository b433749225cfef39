"""Health of the policy LSTM's hidden and cell states: norms, extremes, finiteness, one sync.

Norms are the mean over samples of each sample's L2 norm (the last dimension), so they
do not grow with the batch size or the number of envs. Statistics are taken over the
finite entries; ``nonfinite`` says whether any entry was NaN or Inf. Every number is
computed on the device and stacked, and one ``.tolist()`` reads them all: booleans ride
along as 0.0/1.0 floats because a single transfer needs a single dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from leyline.esper import LSTMHealth


@dataclass(frozen=True)
class LSTMThresholds:
    """When the LSTM state counts as exploding or vanishing."""

    max_norm: float = 100.0
    """Mean per-sample norm of h or c above which the state is exploding."""
    min_norm: float = 1e-6
    """Mean per-sample norm of h below which the state is vanishing (it carries nothing)."""

    def __post_init__(self) -> None:
        if not (0.0 <= self.min_norm < self.max_norm):
            raise ValueError(f"need 0 <= min_norm < max_norm, got {self.min_norm} and {self.max_norm}")


def _state_stats(x: torch.Tensor) -> list[torch.Tensor]:
    x = x.detach().float()
    finite = torch.isfinite(x)
    clean = torch.where(finite, x, torch.zeros((), dtype=x.dtype, device=x.device))
    rows = clean.reshape(-1, clean.shape[-1]) if clean.dim() > 0 else clean.reshape(1, 1)
    per_sample = torch.linalg.vector_norm(rows, dim=-1)
    return [per_sample.mean(), clean.abs().max(), (~finite).any().float()]


@torch.compiler.disable
def lstm_health(h: torch.Tensor, c: torch.Tensor, thresholds: LSTMThresholds | None = None) -> LSTMHealth:
    """Measure ``(h, c)`` (any leading shape, hidden size last) with one device-to-host transfer."""
    t = thresholds or LSTMThresholds()
    with torch.no_grad():
        stacked = torch.stack(_state_stats(h) + _state_stats(c))
    h_norm, h_max, h_bad, c_norm, c_max, c_bad = stacked.tolist()
    return LSTMHealth(
        h_norm=h_norm, c_norm=c_norm, h_max=h_max, c_max=c_max,
        nonfinite=bool(h_bad or c_bad),
        exploding=h_norm > t.max_norm or c_norm > t.max_norm,
        vanishing=h_norm < t.min_norm,
    )
