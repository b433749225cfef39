"""``nissa.Histogram``: a distribution to log, computed where its values are.

    run.log({"weights/fc1": nissa.Histogram(model.fc1.weight, bins=64)})

Each histogram is computed on its tensor's device (min and max of the finite values, then a ``bincount`` of
bin indices: temporaries the size of that one tensor, never of all of them together) and every histogram of
one call, or of one ``run.watch`` collection, comes back to the host in one transfer per device. Bins are of
equal width from ``min`` to ``max``; NaN and infinities are counted apart (``nonfinite``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from leyline import Distribution
from leyline.payloads_histogram import MAX_BINS
from nissa.telemetry.readback import StreamFence, read_all


class Histogram:
    """Values (a tensor, a NumPy array, a sequence of numbers) to log as a distribution of ``bins`` bins."""

    __slots__ = ("bins", "values")

    def __init__(self, values: Any, bins: int = 64) -> None:
        if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
            raise ValueError(f"nissa.Histogram: bins must be an int in 1..{MAX_BINS}, got {bins!r}")
        tensor = values if isinstance(values, torch.Tensor) else torch.as_tensor(values)
        if tensor.is_complex() or tensor.dtype == torch.bool:
            raise ValueError(f"nissa.Histogram: values must be real numbers, got {tensor.dtype}")
        self.values = tensor.detach()
        self.bins = bins


def _launch(t: torch.Tensor, bins: int) -> torch.Tensor:
    """``[min, max, count, *bins, nonfinite]`` of ``t`` as a float64 tensor on its device (nothing read yet)."""
    if t.numel() == 0:
        return torch.zeros(bins + 4, dtype=torch.float64, device=t.device)
    flat = t.reshape(-1)
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()  # half precision and integers: bin arithmetic in float32
    finite = torch.isfinite(flat)
    big = torch.finfo(flat.dtype).max
    lo = torch.where(finite, flat, big).amin()
    hi = torch.where(finite, flat, -big).amax()
    width = (hi - lo).clamp_min(torch.finfo(flat.dtype).tiny) / bins
    index = ((flat - lo) / width).floor_().clamp_(0, bins - 1)
    index = torch.where(finite, index, bins).long()  # the extra bin: NaN and infinities
    counts = torch.bincount(index, minlength=bins + 1).to(torch.float64)
    n = counts[:bins].sum().reshape(1)
    return torch.cat([torch.stack([lo, hi]).to(torch.float64), n, counts])


class PendingHistograms:
    """Distributions launched on one device and not read yet: ``readback.read_all`` reads them together with
    any other figures of the same collection (one device→host transfer for all)."""

    def __init__(self, named: Sequence[tuple[str, Histogram]], indices: Sequence[int] = ()) -> None:
        self.named = list(named)
        self.indices = list(indices) or list(range(len(self.named)))
        """Where each of ``named`` stood in what ``launch_histograms`` was given."""
        launched = [_launch(h.values, h.bins) for _, h in self.named]
        self._values = launched[0] if len(launched) == 1 else torch.cat(launched)
        self._fence = StreamFence(self._values.device)
        self.distributions: list[Distribution] | None = None

    @property
    def fence(self) -> StreamFence:
        return self._fence

    @property
    def values(self) -> torch.Tensor:
        return self._values

    def absorb(self, values: list[float]) -> None:
        out, at = [], 0
        for name, h in self.named:
            figures = values[at:at + h.bins + 4]
            at += h.bins + 4
            count = int(figures[2])
            out.append(Distribution(name=name, min=figures[0] if count else None, max=figures[1] if count else None,
                                    count=count, nonfinite=int(figures[-1]),
                                    bins=[int(c) for c in figures[3:3 + h.bins]]))
        self.distributions = out


def launch_histograms(named: Sequence[tuple[str, Histogram]]) -> list[PendingHistograms]:
    """The distributions of ``named`` launched on their devices, one pending read per device; no sync."""
    by_device: dict[torch.device, list[int]] = {}
    for i, (_, h) in enumerate(named):
        by_device.setdefault(h.values.device, []).append(i)
    return [PendingHistograms([named[i] for i in group], group) for group in by_device.values()]


def distributions(named: Sequence[tuple[str, Histogram]]) -> list[Distribution]:
    """The distributions of ``named``, launched on their devices and read back in one transfer per device."""
    pending = launch_histograms(named)
    read_all(pending)
    found = {i: d for p in pending for i, d in zip(p.indices, p.distributions or [], strict=True)}
    return [found[i] for i in range(len(named))]
