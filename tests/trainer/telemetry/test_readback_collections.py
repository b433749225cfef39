"""Every collection read back from the device is a ``DeviceFigures``: one fence and one launched tensor each,
defined once, and any mix of them read in one transfer."""

from __future__ import annotations

import pytest
import torch

from nissa import Histogram
from nissa.parts import (
    DeviceFigures,
    PendingHistograms,
    PendingLayers,
    launch_histograms,
    launch_layer_stats,
    read_all,
)
from nissa.telemetry.syncs import HostSyncCounter
from trainer.telemetry.flat import FlatRead
from trainer.telemetry.gradients import GradientThresholds, PendingGradients, collect_gradients

COLLECTIONS = (PendingHistograms, PendingLayers, PendingGradients, FlatRead)


@pytest.mark.parametrize("cls", COLLECTIONS, ids=lambda c: c.__name__)
def test_each_collection_takes_its_fence_and_values_from_the_one_base(cls):
    assert issubclass(cls, DeviceFigures)
    assert "fence" not in vars(cls) and "values" not in vars(cls)


def test_a_base_without_absorb_cannot_be_made():
    with pytest.raises(TypeError):
        DeviceFigures(torch.zeros(1))  # type: ignore[abstract]  # the point: absorb is abstract


def test_nothing_launched_has_a_cpu_fence_and_no_values():
    empty = collect_gradients("host", [])
    assert not empty.fence.on_stream and not empty.unread
    with pytest.raises(AssertionError):
        _ = empty.values
    assert empty.resolve().global_norm is None


def test_a_mix_of_collections_is_read_in_one_transfer():
    model = torch.nn.Linear(4, 3)
    model(torch.randn(5, 4)).sum().backward()
    gradients = collect_gradients("host", model.parameters(), GradientThresholds())
    layers = launch_layer_stats("host", model.named_parameters())
    assert layers is not None
    histograms = launch_histograms([("w", Histogram(model.weight, 8))])
    with HostSyncCounter(torch.device("cpu")) as syncs:
        read_all([gradients, layers, *histograms])
    assert syncs.count == 1
    assert [f.fence.waited for f in (gradients, layers, *histograms)] == [True] * 3
    assert gradients.resolve().n_tensors == 2 and not gradients.unread
    assert layers.layers is not None and [s.name for s in layers.layers] == ["weight", "bias"]
    assert histograms[0].distributions is not None and histograms[0].distributions[0].name == "w"
