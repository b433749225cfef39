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

from collections.abc import Iterable

import torch

from leyline import DebugLayerStats, LayerStat, TelemetryLevel

from nissa.telemetry.readback import StreamFence, read_all

LAYERS_PER_EVENT = 256  # keeps one event well under the wire's per-event size bound


def _finite(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.detach().float()
    ok = torch.isfinite(x)
    return torch.where(ok, x, torch.zeros((), dtype=x.dtype, device=x.device)), (~ok).sum()


def _layer_row(param: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    g, g_bad = _finite(grad)
    w, w_bad = _finite(param)
    n_ok = (g.numel() - g_bad).clamp(min=1)
    mean = g.sum() / n_ok
    # Population std over the finite entries (one-element layers give 0, not NaN).
    std = ((g - mean).pow(2).sum() - g_bad * mean.pow(2)).clamp(min=0).div(n_ok).sqrt()
    return torch.stack([torch.linalg.vector_norm(g), mean, std, g.abs().max(),
                        torch.linalg.vector_norm(w), (g_bad + w_bad).float()])


class PendingLayers:
    """One module's per-layer rows, launched on the device and not read yet (``read_all`` reads them)."""

    def __init__(self, model: str, names: list[str], rows: torch.Tensor) -> None:
        self.model = model
        self.names = names
        self._rows = rows
        self._fence = StreamFence(rows.device)
        self.layers: list[LayerStat] | None = None

    @property
    def fence(self) -> StreamFence:
        return self._fence

    @property
    def values(self) -> torch.Tensor:
        return self._rows

    def absorb(self, values: list[float]) -> None:
        width = self._rows.shape[1]
        self.layers = [LayerStat(name=n, grad_norm=v[0], grad_mean=v[1], grad_std=v[2], grad_abs_max=v[3],
                                 weight_norm=v[4], nonfinite=int(v[5]))
                       for n, v in zip(self.names, (values[i: i + width] for i in range(0, len(values), width)))]

    def payloads(self) -> list[DebugLayerStats]:
        """``debug_layer_stats`` payloads of what was read (several for a large model)."""
        assert self.layers is not None, "read it first (read_all)"
        return [DebugLayerStats(model=self.model, layers=self.layers[i: i + LAYERS_PER_EVENT])
                for i in range(0, len(self.layers), LAYERS_PER_EVENT)]


@torch.compiler.disable
def launch_layer_stats(model: str, named_params: Iterable[tuple[str, torch.nn.Parameter]]) -> PendingLayers | None:
    """Launch the statistics of every parameter of ``model`` that has a gradient; no sync (None: no gradients)."""
    names: list[str] = []
    rows: list[torch.Tensor] = []
    with torch.no_grad():
        for name, p in named_params:
            if p.grad is None:
                continue
            names.append(name)
            rows.append(_layer_row(p, p.grad))
        if not rows:
            return None
        return PendingLayers(model, names, torch.stack(rows))


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
