"""``nissa.Histogram``: a distribution to log, computed where its values are.

    run.log({"weights/fc1": nissa.Histogram(model.fc1.weight, bins=64)})

Each histogram is computed on its tensor's device (min and max of the finite values, then a ``bincount`` of
bin indices: ``segmented_histograms``, the one binning path); consecutive tensors of the same bins are binned
together as segments of one, up to ``CHUNK_ELEMENTS`` elements at a time (a fixed number of kernels for many
small layers, temporaries never the size of all of them together), and every histogram of one call, or of one
``run.watch`` collection, comes back to the host in one transfer per device. Bins are of equal width from
``min`` to ``max``; NaN and infinities are counted apart (``nonfinite``). The segment ids of the layouts a
collector repeats are kept by that collector (``SegmentCache``), not by the process.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from leyline import Distribution
from leyline.payloads_histogram import DEFAULT_BINS, MAX_BINS
from nissa.telemetry.readback import DeviceFigures, read_all


class Histogram:
    """Values (a tensor, a NumPy array, a sequence of numbers) to log as a distribution of ``bins`` bins."""

    __slots__ = ("bins", "values")

    def __init__(self, values: Any, bins: int = DEFAULT_BINS) -> None:
        if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
            raise ValueError(f"nissa.Histogram: bins must be an int in 1..{MAX_BINS}, got {bins!r}")
        tensor = values if isinstance(values, torch.Tensor) else torch.as_tensor(values)
        if tensor.is_complex() or tensor.dtype == torch.bool:
            raise ValueError(f"nissa.Histogram: values must be real numbers, got {tensor.dtype}")
        self.values = tensor.detach()
        self.bins = bins


def _as_binnable(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().reshape(-1)
    return flat if flat.dtype in (torch.float32, torch.float64) else flat.float()  # bin arithmetic in float32


def _bin_index(flat: torch.Tensor, finite: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
               bins: int) -> torch.Tensor:
    """Each value's bin (``bins``: NaN and infinities) between ``lo`` and ``hi`` (scalars or one per value)."""
    # hi / bins - lo / bins: finite where hi - lo overflows (a tensor from -max to max of its dtype); a value whose
    # distance from lo overflows is in the last bin, never NaN.
    width = (hi / bins - lo / bins).clamp_min(torch.finfo(flat.dtype).tiny)
    index = ((flat - lo) / width).nan_to_num_(nan=0.0).floor_().clamp_(0, bins - 1)
    return torch.where(finite, index, bins).long()


def segmented_histograms(values: torch.Tensor, seg: torch.Tensor | None, n: int, bins: int) -> torch.Tensor:
    """``[n, bins + 4]`` rows ``[min, max, count, *bins, nonfinite]``, float64, of the ``n`` segments of a flat
    tensor whose element i belongs to segment ``seg[i]`` (every segment non-empty; ``seg`` None: one segment, all
    of ``values``): the same bins as ``n`` histograms of the segments apart, in a fixed number of kernels whatever
    ``n`` (nothing read yet)."""
    flat = _as_binnable(values)
    finite = torch.isfinite(flat)
    big = torch.finfo(flat.dtype).max
    low, high = torch.where(finite, flat, big), torch.where(finite, flat, -big)
    if seg is None:
        lo, hi = low.amin().reshape(1), high.amax().reshape(1)
        index = _bin_index(flat, finite, lo, hi, bins)
    else:
        start = torch.full((n,), big, dtype=flat.dtype, device=flat.device)
        lo = start.scatter_reduce(0, seg, low, "amin")
        hi = start.neg().scatter_reduce(0, seg, high, "amax")
        index = _bin_index(flat, finite, lo.index_select(0, seg), hi.index_select(0, seg), bins) + seg * (bins + 1)
    counts = torch.bincount(index, minlength=n * (bins + 1)).view(n, bins + 1).to(torch.float64)
    return torch.cat([lo.to(torch.float64).unsqueeze(1), hi.to(torch.float64).unsqueeze(1),
                      counts[:, :bins].sum(1, keepdim=True), counts], 1)


def distribution(name: str, figures: list[float], bins: int) -> Distribution:
    """The ``Distribution`` of one histogram's ``[min, max, count, *bins, nonfinite]`` as read back. Values spread
    wider than a float holds (``max - min`` past 1.8e308: no bin width) are counted apart, with ``nonfinite``:
    the contract takes no such range."""
    count, nonfinite = int(figures[2]), int(figures[-1])
    if count and not math.isfinite(figures[1] - figures[0]):
        return Distribution(name=name, min=None, max=None, count=0, nonfinite=count + nonfinite, bins=[0] * bins)
    return Distribution(name=name, min=figures[0] if count else None, max=figures[1] if count else None,
                        count=count, nonfinite=nonfinite, bins=list(map(int, figures[3:3 + bins])))


CHUNK_ELEMENTS = 1 << 22
"""Elements binned together at most (16 MiB of float32): what a collection adds to memory, at most."""


class SegmentCache:
    """The segments of the layouts a collector's collections repeat (a watched model's layers, an env's host and
    seeds, which come and go: a few layouts), made on the device once and kept by that collector: each element's
    segment index and each segment's size. A layout over ``CHUNK_ELEMENTS`` elements is made each time, not kept;
    past ``capacity`` layouts the cache starts again."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._made: dict[tuple[tuple[int, ...], torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    def __len__(self) -> int:
        return len(self._made)

    def get(self, sizes: tuple[int, ...], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(segment index of every element, each segment's size as a float) of segments of ``sizes``, on
        ``device`` (no upload, no sync)."""
        key = (sizes, device)
        made = self._made.get(key)
        if made is None:
            made = (torch.cat([torch.full((n,), i, dtype=torch.int64, device=device) for i, n in enumerate(sizes)]),
                    torch.cat([torch.full((1,), float(n), device=device) for n in sizes]))
            if sum(sizes) <= CHUNK_ELEMENTS:
                if len(self._made) >= self.capacity:
                    self._made.clear()
                self._made[key] = made
        return made


def _runs(hists: Sequence[Histogram]) -> list[list[Histogram]]:
    """Consecutive histograms binned together: the same bins and dtype, non-empty, at most ``CHUNK_ELEMENTS``
    elements in all (a larger tensor or an empty one alone)."""
    out: list[list[Histogram]] = []
    key: object = None
    total = 0
    for h in hists:
        n = h.values.numel()
        k = (h.bins, h.values.dtype in (torch.float32, torch.float64) and h.values.dtype)
        if not out or n == 0 or k != key or total + n > CHUNK_ELEMENTS or out[-1][0].values.numel() == 0:
            out.append([])
            key, total = k, 0
        out[-1].append(h)
        total += n
    return out


def _launch_run(run: list[Histogram], segments: SegmentCache | None) -> torch.Tensor:
    """The rows of each of ``run`` concatenated, in a fixed number of kernels for a run of several."""
    first, bins = run[0].values, run[0].bins
    if first.numel() == 0:  # alone in its run (``_runs``)
        return torch.zeros(bins + 4, dtype=torch.float64, device=first.device)
    if len(run) == 1:
        return segmented_histograms(first, None, 1, bins).reshape(-1)
    sizes = tuple(h.values.numel() for h in run)
    seg = (SegmentCache() if segments is None else segments).get(sizes, first.device)[0]
    flat = torch.cat([_as_binnable(h.values) for h in run])
    return segmented_histograms(flat, seg, len(run), bins).reshape(-1)


class PendingHistograms(DeviceFigures):
    """Distributions launched on one device and not read yet: ``readback.read_all`` reads them together with
    any other figures of the same collection (one device→host transfer for all)."""

    def __init__(self, named: Sequence[tuple[str, Histogram]], indices: Sequence[int] = (),
                 segments: SegmentCache | None = None) -> None:
        self.named = list(named)
        self.indices = list(indices) or list(range(len(self.named)))
        """Where each of ``named`` stood in what ``launch_histograms`` was given."""
        launched = [_launch_run(run, segments) for run in _runs([h for _, h in self.named])]
        super().__init__(launched[0] if len(launched) == 1 else torch.cat(launched))
        self.distributions: list[Distribution] | None = None

    def absorb(self, values: list[float]) -> None:
        out, at = [], 0
        for name, h in self.named:
            out.append(distribution(name, values[at:at + h.bins + 4], h.bins))
            at += h.bins + 4
        self.distributions = out


def launch_histograms(named: Sequence[tuple[str, Histogram]],
                      segments: SegmentCache | None = None) -> list[PendingHistograms]:
    """The distributions of ``named`` launched on their devices, one pending read per device; no sync.
    ``segments``: the collector's own cache of the layouts it repeats (None: made for this call)."""
    by_device: dict[torch.device, list[int]] = {}
    for i, (_, h) in enumerate(named):
        by_device.setdefault(h.values.device, []).append(i)
    return [PendingHistograms([named[i] for i in group], group, segments) for group in by_device.values()]


def distributions(named: Sequence[tuple[str, Histogram]], segments: SegmentCache | None = None) -> list[Distribution]:
    """The distributions of ``named``, launched on their devices and read back in one transfer per device."""
    pending = launch_histograms(named, segments)
    read_all(pending)
    found = {i: d for p in pending for i, d in zip(p.indices, p.distributions or [], strict=True)}
    return [found[i] for i in range(len(named))]
