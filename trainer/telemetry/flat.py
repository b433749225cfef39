"""Gradient health (and at DEBUG per-layer statistics) of the batched envs: every env and scope in one go.

The batched envs keep every trainable tensor of every env in one flat buffer (``trainer.simic.
batched_layout``), each element tagged with its layer, and every scope's layers consecutive. So
the per-tensor norms of every env and scope are one segmented reduction over the flat gradient
buffer, the per-layer statistics one more over the flat parameter and gradient buffers, each layer's
gradient and weight distributions (at DEBUG) one segmented binning of each buffer, and all of it is
read back as one tensor. They are handed out as the per-env loop's ``PendingGradients`` and
``PendingLayers``, one per (env, scope), and the distributions under the per-env loop's names
(``debug/env<e>/<scope>/gradients/<layer>``, ``.../weights/<layer>``), so everything downstream (drift,
ratios, anomaly checks, the events) is the same either way.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from leyline import Distribution
from nissa.parts import DEBUG_BINS, DeviceFigures, PendingLayers, debug_distribution_names, distribution
from trainer.telemetry.gradients import GradientThresholds, PendingGradients, env_scope

if TYPE_CHECKING:
    from trainer.simic.batched import FlatGradients
    from trainer.simic.batched_layout import Scope


class FlatRead(DeviceFigures):
    """The launched figures of every scope as ONE tensor; reading it fills each scope's collection."""

    def __init__(self, norms: torch.Tensor, rows: torch.Tensor | None, gradients: list[PendingGradients],
                 layers: list[PendingLayers], histograms: torch.Tensor | None = None,
                 names: list[str] | None = None, bins: int = DEBUG_BINS) -> None:
        parts = [norms, *(t.reshape(-1).to(norms.dtype) for t in (rows, histograms) if t is not None)]
        super().__init__(parts[0] if len(parts) == 1 else torch.cat(parts))
        self._n_norms = norms.shape[0]
        self._n_rows = 0 if rows is None else rows.numel()
        self._names, self._bins = names or [], bins
        self.gradients, self.layers = gradients, layers
        self.distributions: list[Distribution] = []
        """Each layer's gradient and weight distributions (at DEBUG), in the per-env loop's order, once read."""

    @property
    def covers(self) -> set[int]:
        """ids of the collections this read fills."""
        return {id(x) for x in (*self.gradients, *self.layers)}

    def absorb(self, values: list[float]) -> None:
        offset = 0
        for pending in self.gradients:
            n = pending.values.shape[0]
            pending.absorb(values[offset: offset + n])
            offset += n
        rows = values[self._n_norms: self._n_norms + self._n_rows]
        offset = 0
        for lay in self.layers:
            n = lay.values.numel()
            lay.absorb(rows[offset: offset + n])
            offset += n
        width = self._bins + 4
        figures = values[self._n_norms + self._n_rows:]
        self.distributions = [distribution(name, figures[i * width: (i + 1) * width], self._bins)
                              for i, name in enumerate(self._names)]


@dataclass
class FlatCollection:
    read: FlatRead
    gradients: list[tuple[int, PendingGradients]]
    layers: list[tuple[int, PendingLayers]]


@torch.compiler.disable
def collect_flat(grads: FlatGradients, thresholds: GradientThresholds, debug: bool) -> FlatCollection:
    """Launch the norms (and with ``debug`` the layer rows and distributions) of every env and scope; no sync."""
    norms = grads.layer_norms()
    rows = grads.layer_stats() if debug else None
    histograms = grads.layer_histograms(DEBUG_BINS) if debug else None
    gradients: list[tuple[int, PendingGradients]] = []
    layers: list[tuple[int, PendingLayers]] = []
    for scope in grads.scopes:
        end = scope.first + len(scope.names)
        gradients.append((scope.env, PendingGradients(scope.name, norms[scope.first: end], scope.n_params,
                                                      thresholds)))
        if rows is not None:
            layers.append((scope.env, PendingLayers(scope.name, list(scope.names), rows[scope.first: end])))
    read = FlatRead(norms, rows, [p for _, p in gradients], [lay for _, lay in layers], histograms,
                    _distribution_names(tuple(grads.scopes)) if debug else None)
    return FlatCollection(read, gradients, layers)


@functools.lru_cache(maxsize=8)
def _distribution_names(scopes: tuple[Scope, ...]) -> list[str]:
    """Per layer (scope by scope), its gradients' then its weights' distribution name, as the per-env loop has
    them (and as ``layer_histograms`` has their rows); made once per grouping of the seeds."""
    return [name for scope in scopes for layer in scope.names
            for name in debug_distribution_names(env_scope(scope.env, scope.name), layer)]
