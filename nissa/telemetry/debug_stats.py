"""Per-layer gradient and weight statistics, collected only at DEBUG, with one sync for all layers.

For every parameter with a gradient: gradient L2 norm, mean, std, largest magnitude,
weight norm, and the count of NaN/Inf entries in the gradient and the weight. The
non-finite checks are reductions stacked with the other statistics, so they cost no
extra transfer: ``launch_layer_stats`` leaves an ``[n_layers, 6]`` tensor on the device
(with a fence, as gradient norms have), and the loop reads every env's and scope's rows
together with the gradient norms in one transfer per collection (``readback.read_all``).
Statistics are taken over finite entries, so one NaN does not hide the rest of a layer.
The parameter list is dynamic (seeds come and go), hence ``torch.compiler.disable``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from leyline import DebugLayerStats, Distribution, Histograms, LayerStat, TelemetryLevel
from leyline.payloads_histogram import one_a_name
from nissa.histogram import CHUNK_ELEMENTS, Histogram, PendingHistograms, SegmentCache
from nissa.integrations.names import metric_name
from nissa.telemetry.readback import DeviceFigures, read_all

LAYERS_PER_EVENT = 256  # keeps one event well under the wire's per-event size bound


def _finite(x: torch.Tensor, seg: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` as floats with NaN/Inf zeroed, and each layer's count of those."""
    x = x.detach().float()
    ok = torch.isfinite(x)
    bad = torch.zeros(n, device=x.device).index_add_(0, seg, (~ok).float())
    return torch.where(ok, x, torch.zeros((), dtype=x.dtype, device=x.device)), bad


def _chunk_rows(params: list[torch.Tensor], grads: list[torch.Tensor], segments: SegmentCache) -> torch.Tensor:
    """``[len(params), 6]`` rows of one chunk, in a fixed number of kernels whatever its number of layers."""
    seg, size = segments.get(tuple(g.numel() for g in grads), grads[0].device)
    flat = [torch.cat([t.detach().reshape(-1) for t in tensors]) for tensors in (params, grads)]
    return layer_rows(flat[0], flat[1], seg, size)


def layer_rows(weights: torch.Tensor, grads: torch.Tensor, seg: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
    """``[n_layers, 6]`` rows from flat weights and gradients whose element i belongs to layer ``seg[i]``
    (``size``: each layer's element count, as floats), in a fixed number of kernels whatever the layers."""
    n = size.shape[0]
    g, g_bad = _finite(grads, seg, n)
    w, w_bad = _finite(weights, seg, n)
    zeros = torch.zeros(n, device=g.device)
    n_ok = (size - g_bad).clamp(min=1)
    mean = zeros.index_add(0, seg, g) / n_ok
    # Population std over the finite entries (the zeroed ones deviate by -mean: taken back out).
    dev = zeros.index_add(0, seg, (g - mean[seg]).pow(2))
    std = (dev - g_bad * mean.pow(2)).clamp(min=0).div(n_ok).sqrt()
    g_norm = zeros.index_add(0, seg, g * g).sqrt()
    w_norm = zeros.index_add(0, seg, w * w).sqrt()
    g_max = zeros.scatter_reduce(0, seg, g.abs(), "amax", include_self=True)
    return torch.stack([g_norm, mean, std, g_max, w_norm, g_bad + w_bad], dim=1)


def _chunks(layers: Sequence[tuple[str, torch.Tensor, torch.Tensor]],
            ) -> list[list[tuple[str, torch.Tensor, torch.Tensor]]]:
    """Consecutive layers in groups of at most ``CHUNK_ELEMENTS`` elements (a larger layer alone)."""
    out: list[list[tuple[str, torch.Tensor, torch.Tensor]]] = [[]]
    total = 0
    for layer in layers:
        size = layer[2].numel()
        if out[-1] and total + size > CHUNK_ELEMENTS:
            out.append([])
            total = 0
        out[-1].append(layer)
        total += size
    return out


class PendingLayers(DeviceFigures):
    """One module's per-layer rows, launched on the device and not read yet (``read_all`` reads them)."""

    def __init__(self, model: str, names: list[str], rows: torch.Tensor) -> None:
        self.model = model
        self.names = names
        super().__init__(rows)
        self.layers: list[LayerStat] | None = None

    def absorb(self, values: list[float]) -> None:
        width = self.values.shape[1]
        self.layers = [LayerStat(name=n, grad_norm=v[0], grad_mean=v[1], grad_std=v[2], grad_abs_max=v[3],
                                 weight_norm=v[4], nonfinite=int(v[5]))
                       for n, v in zip(self.names, (values[i: i + width] for i in range(0, len(values), width)),
                                       strict=True)]

    def payloads(self) -> list[DebugLayerStats]:
        """``debug_layer_stats`` payloads of what was read (several for a large model)."""
        assert self.layers is not None, "read it first (read_all)"
        return [DebugLayerStats(model=self.model, layers=self.layers[i: i + LAYERS_PER_EVENT])
                for i in range(0, len(self.layers), LAYERS_PER_EVENT)]


@torch.compiler.disable
def launch_layer_stats(model: str, named_params: Iterable[tuple[str, torch.nn.Parameter]],
                       segments: SegmentCache | None = None) -> PendingLayers | None:
    """Launch the statistics of every parameter of ``model`` that has a gradient; no sync (None: no gradients).
    ``segments``: the collector's own cache of the layouts it repeats (None: made for this call)."""
    segments = SegmentCache() if segments is None else segments
    with torch.no_grad():
        layers = [(name, p, p.grad) for name, p in named_params if p.grad is not None]
        if not layers:
            return None
        rows = [_chunk_rows([p for _, p, _ in chunk], [g for _, _, g in chunk], segments)
                for chunk in _chunks(layers)]
        return PendingLayers(model, [name for name, _, _ in layers], rows[0] if len(rows) == 1 else torch.cat(rows))


DEBUG_BINS = 32
"""Bins of a debug window's per-layer distributions."""
MAX_DEBUG_DISTRIBUTIONS = 2048
"""Distributions one collection takes at most (a gradient and a weight of 1024 layers)."""
DISTRIBUTIONS_PER_EVENT = 256
"""Distributions one ``histogram`` event holds (well under the wire's per-event bound at ``DEBUG_BINS``)."""


def layer_histograms(model: str, named_params: Iterable[tuple[str, torch.nn.Parameter]],
                     bins: int = DEBUG_BINS) -> list[tuple[str, Histogram]]:
    """Each layer's gradient and weight distributions to take beside its statistics (a layer with a gradient):
    ``debug/<model>/gradients/<layer>`` and ``debug/<model>/weights/<layer>``, one chart each."""
    out: list[tuple[str, Histogram]] = []
    for name, p in named_params:
        if p.grad is not None:
            gradients, weights = debug_distribution_names(model, name)
            out.append((gradients, Histogram(p.grad, bins)))
            out.append((weights, Histogram(p, bins)))
    return out


def debug_distribution_names(model: str, layer: str) -> tuple[str, str]:
    """The names of a layer's gradient and weight distributions in a debug window."""
    return metric_name(f"debug/{model}/gradients/{layer}"), metric_name(f"debug/{model}/weights/{layer}")


def debug_histogram_payloads(pending: Iterable[PendingHistograms],
                             more: Iterable[Distribution] = ()) -> list[Histograms]:
    """``histogram`` payloads of distributions read (``read_all``), and of ``more`` read otherwise, a few
    hundred an event, the first of each name (``one_a_name``)."""
    found = one_a_name([*(d for p in pending for d in (p.distributions or [])), *more])
    return [Histograms(histograms=found[i: i + DISTRIBUTIONS_PER_EVENT])
            for i in range(0, len(found), DISTRIBUTIONS_PER_EVENT)]


def collect_layer_stats(named_params: Iterable[tuple[str, torch.nn.Parameter]]) -> list[LayerStat]:
    """Statistics of every parameter that has a gradient, read in one transfer."""
    pending = launch_layer_stats("", named_params)
    if pending is None:
        return []
    read_all([pending])
    assert pending.layers is not None
    return pending.layers


def debug_layer_payloads(model: str, named_params: Iterable[tuple[str, torch.nn.Parameter]],
                         level: TelemetryLevel) -> list[DebugLayerStats]:
    """``debug_layer_stats`` payloads of ``model`` when ``level`` is DEBUG; nothing (and no work) below."""
    if level is not TelemetryLevel.DEBUG:
        return []
    pending = launch_layer_stats(model, named_params)
    if pending is None:
        return []
    read_all([pending])
    return pending.payloads()
