"""Gradient health (and at DEBUG per-layer statistics) of the batched envs: every env and scope in one go.

The batched envs keep every trainable tensor of every env in one flat buffer (``trainer.simic.
batched_layout``), each element tagged with its layer, and every scope's layers consecutive. So
the per-tensor norms of every env and scope are one segmented reduction over the flat gradient
buffer, the per-layer statistics one more over the flat parameter and gradient buffers, and both
are read back as one tensor. They are handed out as the per-env loop's ``PendingGradients`` and
``PendingLayers``, one per (env, scope), so everything downstream (drift, ratios, anomaly checks,
the events) is the same either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from nissa import PendingLayers, StreamFence
from trainer.telemetry.gradients import GradientThresholds, PendingGradients

if TYPE_CHECKING:
    from trainer.simic.batched import FlatGradients


class FlatRead:
    """The launched figures of every scope as ONE tensor; reading it fills each scope's collection."""

    def __init__(self, norms: torch.Tensor, rows: torch.Tensor | None, gradients: list[PendingGradients],
                 layers: list[PendingLayers]) -> None:
        self._values = norms if rows is None else torch.cat([norms, rows.reshape(-1).to(norms.dtype)])
        self._fence = StreamFence(self._values.device)
        self._n_norms = norms.shape[0]
        self.gradients, self.layers = gradients, layers

    @property
    def fence(self) -> StreamFence:
        return self._fence

    @property
    def values(self) -> torch.Tensor:
        return self._values

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
        rows = values[self._n_norms:]
        offset = 0
        for lay in self.layers:
            n = lay.values.numel()
            lay.absorb(rows[offset: offset + n])
            offset += n


@dataclass
class FlatCollection:
    read: FlatRead
    gradients: list[tuple[int, PendingGradients]]
    layers: list[tuple[int, PendingLayers]]


@torch.compiler.disable
def collect_flat(grads: FlatGradients, thresholds: GradientThresholds, debug: bool) -> FlatCollection:
    """Launch the norms (and with ``debug`` the layer rows) of every env and scope; no sync."""
    norms = grads.layer_norms()
    rows = grads.layer_stats() if debug else None
    gradients: list[tuple[int, PendingGradients]] = []
    layers: list[tuple[int, PendingLayers]] = []
    for scope in grads.scopes:
        end = scope.first + len(scope.names)
        gradients.append((scope.env, PendingGradients(scope.name, norms[scope.first: end], scope.n_params,
                                                      thresholds)))
        if rows is not None:
            layers.append((scope.env, PendingLayers(scope.name, list(scope.names), rows[scope.first: end])))
    read = FlatRead(norms, rows, [p for _, p in gradients], [lay for _, lay in layers])
    return FlatCollection(read, gradients, layers)
