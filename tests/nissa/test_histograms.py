"""``nissa.Histogram`` and ``run.watch(model, histograms=…)``: fixed bins with min, max and count, NaN counted
apart, computed on the tensor's device and read in one transfer per collection."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import nissa
from leyline import EventKind, decode_event
from nissa.histogram import SegmentCache, distributions, segmented_histograms
from nissa.telemetry import debug_stats
from nissa.telemetry.debug_stats import launch_layer_stats
from nissa.telemetry.syncs import HostSyncCounter


def _events(run: nissa.Run, kind: EventKind) -> list:
    return [e for e in (decode_event(line) for line in run.log_path.read_bytes().splitlines()) if e.kind is kind]


def test_bins_of_equal_width_from_min_to_max():
    (d,) = distributions([("w", nissa.Histogram(torch.tensor([0.0, 1, 2, 3, 4, math.nan, -math.inf]), bins=4))])
    assert (d.min, d.max, d.count, d.nonfinite, d.bins) == (0.0, 4.0, 5, 2, [1, 1, 1, 2])  # the last bin holds max
    (same,) = distributions([("c", nissa.Histogram(np.full(5, 3.0, dtype=np.float16), bins=3))])
    assert (same.min, same.max, same.bins) == (3.0, 3.0, [5, 0, 0])
    (empty,) = distributions([("e", nissa.Histogram([], bins=2))])
    assert (empty.min, empty.max, empty.count, empty.bins) == (None, None, 0, [0, 0])  # not measured, never 0
    with pytest.raises(ValueError, match="bins must be an int in 1..512"):
        nissa.Histogram([1.0], bins=0)


def test_many_histograms_binned_together_give_each_ones_own_bins(monkeypatch):
    """Consecutive tensors of the same bins are binned in one go (a fixed number of kernels, chunked): each
    distribution is the one it has alone, empty, integer, half, float64, NaN-holding and constant ones included."""
    torch.manual_seed(0)
    values = [torch.randn(40), torch.randn(3, 5) * 4, torch.tensor([]), torch.tensor([1.0, math.nan, math.inf, 2.0]),
              torch.randint(-3, 9, (30,)), torch.randn(16).half(), torch.full((7,), 2.5), torch.randn(9).double(),
              torch.randn(25), torch.tensor([math.nan])]
    named = [(f"t{i}", nissa.Histogram(v, bins=8)) for i, v in enumerate(values)] + [("b", nissa.Histogram(values[0]))]
    alone = [distributions([item])[0] for item in named]
    assert distributions(named) == alone
    monkeypatch.setattr("nissa.histogram.CHUNK_ELEMENTS", 30)  # runs split by size too
    assert distributions(named) == alone
    with HostSyncCounter(torch.device("cpu")) as syncs:
        distributions(named)
    assert syncs.count == 1


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def test_the_kernels_of_a_collection_do_not_grow_with_its_layers():
    """Binning a collection's layers together: a fixed number of kernels, not a dozen per layer."""
    def ops(n_layers: int) -> int:
        named = [(f"l{i}", nissa.Histogram(torch.randn(10 + i), bins=32)) for i in range(n_layers)]
        segments = SegmentCache()
        distributions(named, segments)  # segment ids made once, as a collector's repeated collections have them
        with _Ops() as counter:
            distributions(named, segments)
        return counter.count

    assert ops(40) - ops(10) <= 2 * 30  # per layer only the two views that feed the one concatenation


def test_a_logged_histogram_is_one_event_beside_the_scalars(tmp_path):
    run = nissa.init(run_name="h", log_dir=tmp_path, system_metrics=False)
    run.step()
    run.log({"loss": 0.5, "weights/fc1": nissa.Histogram(torch.arange(8.0), bins=2),
             "acts": nissa.Histogram(torch.ones(4), bins=2)})
    run.finish()
    (hist,) = _events(run, EventKind.HISTOGRAM)
    assert [(d.name, d.bins) for d in hist.payload.histograms] == [("weights/fc1", [4, 4]), ("acts", [4, 0])]
    assert hist.step == 0 and [e.payload.values for e in _events(run, EventKind.METRICS)] == [{"loss": 0.5}]


def test_watch_histograms_every_n_steps_one_sync_each(tmp_path):
    run = nissa.init(run_name="h", log_dir=tmp_path, system_metrics=False)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    run.watch(model, histograms="all", every=2, bins=16)
    x = torch.randn(16, 4)
    with HostSyncCounter(torch.device("cpu")) as counter:
        for _ in range(5):
            with run.step():
                model.zero_grad()
                model(x).pow(2).mean().backward()
    assert counter.count == 2  # collections of steps 0 and 2 (the loop's own count): one transfer each
    run.finish()
    events = _events(run, EventKind.HISTOGRAM)
    assert [e.step for e in events] == [0, 2]  # step 4 has no boundary after it
    names = [d.name for d in events[0].payload.histograms]
    assert names == ["parameters/0.weight", "gradients/0.weight", "parameters/0.bias", "gradients/0.bias",
                     "parameters/2.weight", "gradients/2.weight", "parameters/2.bias", "gradients/2.bias"]
    first = events[0].payload.histograms[0]
    assert first.count == 32 and sum(first.bins) == 32 and len(first.bins) == 16
    assert first.min == pytest.approx(model[0].weight.min().item())


def test_two_watched_models_of_one_layout_send_the_first_distribution_of_each_name(tmp_path):
    run = nissa.init(run_name="h", log_dir=tmp_path, system_metrics=False)
    first, second = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    with torch.no_grad():
        second.weight.fill_(7.0)
    run.watch(first, histograms="parameters")
    run.watch(second, histograms="parameters")  # the same names: an event holds one of each
    run.step()
    run.step()  # the end of step 0: its collection
    run.finish()
    (event,) = _events(run, EventKind.HISTOGRAM)
    assert [(d.name, d.max) for d in event.payload.histograms] == [
        ("parameters/weight", pytest.approx(first.weight.max().item())),
        ("parameters/bias", pytest.approx(first.bias.max().item()))]


def test_watch_refuses_an_unknown_mode(tmp_path):
    run = nissa.init(run_name="h", log_dir=tmp_path, system_metrics=False)
    with pytest.raises(ValueError, match="histograms must be one of"):
        run.watch(torch.nn.Linear(2, 2), histograms="weights")
    run.finish()


def test_the_layouts_are_kept_by_their_collector_not_by_the_process(monkeypatch):
    """A collector (``run.watch``, a loop's collectors) keeps the segment ids of the layouts it repeats; nothing is
    kept process-wide, a layout larger than a chunk is made each time, and a cache holds a bounded number."""
    named = [(f"l{i}", nissa.Histogram(torch.randn(5 + i), bins=4)) for i in range(3)]
    mine, yours = SegmentCache(), SegmentCache(capacity=2)
    distributions(named, mine)
    ids = mine.get((5, 6, 7), torch.device("cpu"))[0]
    assert len(mine) == 1 and mine.get((5, 6, 7), torch.device("cpu"))[0] is ids and len(yours) == 0
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    model(torch.randn(4, 3)).sum().backward()
    launch_layer_stats("m", model.named_parameters(), yours)
    distributions(named, yours)
    distributions(named[:2], yours)
    assert len(yours) == 1  # full at two: it started again
    monkeypatch.setattr("nissa.histogram.CHUNK_ELEMENTS", 10)
    big = mine.get((6, 7), torch.device("cpu"))  # 13 elements: made, not kept
    assert big[0].tolist() == [0] * 6 + [1] * 7 and big[1].tolist() == [6.0, 7.0] and len(mine) == 1
    for module in (nissa.histogram, debug_stats):
        assert not [name for name, value in vars(module).items() if isinstance(value, dict) and name[:2] != "__"]


def test_one_tensor_and_its_segments_are_binned_by_one_path():
    """A histogram alone is the one-segment case of the segmented binning: the same rows either way."""
    values = torch.tensor([0.0, 1, 2, 3, 4, math.nan, -math.inf, 2.5])
    alone = segmented_histograms(values, None, 1, 4)
    split = segmented_histograms(torch.cat([values, values]), torch.tensor([0] * 8 + [1] * 8), 2, 4)
    assert torch.equal(split, torch.cat([alone, alone]))
    assert alone.tolist() == [[0.0, 4.0, 6.0, 1.0, 1.0, 2.0, 2.0, 2.0]]  # min, max, count, bins, nonfinite
