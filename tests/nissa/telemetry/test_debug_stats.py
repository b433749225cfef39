"""Per-layer statistics: right numbers, NaN/Inf counted in the same single transfer, only at DEBUG."""

from __future__ import annotations

import pytest
import torch

from leyline import TelemetryLevel, decode_event, encode_event, make_event
from nissa.telemetry.debug_stats import LAYERS_PER_EVENT, collect_layer_stats, debug_layer_payloads
from nissa.telemetry.syncs import HostSyncCounter


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))
    model(torch.randn(2, 3, 8, 8)).sum().backward()
    return model


def test_statistics_match_torch():
    model = _model()
    layers = {s.name: s for s in collect_layer_stats(model.named_parameters())}
    assert set(layers) == {n for n, _ in model.named_parameters()}
    for name, p in model.named_parameters():
        s = layers[name]
        assert s.grad_norm == pytest.approx(float(p.grad.norm()), rel=1e-5)
        assert s.grad_mean == pytest.approx(float(p.grad.mean()), rel=1e-4, abs=1e-7)
        assert s.grad_std == pytest.approx(float(p.grad.std(correction=0)), rel=1e-4, abs=1e-7)
        assert s.grad_abs_max == pytest.approx(float(p.grad.abs().max()))
        assert s.weight_norm == pytest.approx(float(p.detach().norm()), rel=1e-5)
        assert s.nonfinite == 0


def test_nan_and_inf_counted_over_finite_statistics():
    p = torch.nn.Parameter(torch.tensor([1.0, float("inf"), 2.0]))
    p.grad = torch.tensor([float("nan"), 3.0, 5.0])
    (s,) = collect_layer_stats([("w", p)])
    assert s.nonfinite == 2  # one in the gradient, one in the weight
    assert s.grad_mean == pytest.approx(4.0) and s.grad_std == pytest.approx(1.0)
    assert s.grad_norm == pytest.approx(34 ** 0.5) and s.weight_norm == pytest.approx(5 ** 0.5)
    (payload,) = debug_layer_payloads("host", [("w", p)], TelemetryLevel.DEBUG)
    assert decode_event(encode_event(make_event(payload, run_id="r", seq=1, ts=0.0))).payload == payload


def test_one_transfer_for_all_layers():
    model = _model()
    with HostSyncCounter(torch.device("cpu")) as syncs:
        collect_layer_stats(model.named_parameters())
    assert syncs.count == 1, f"one transfer of the [layers, 6] rows: {syncs.by_call}"


@pytest.mark.parametrize("level", [TelemetryLevel.OFF, TelemetryLevel.MINIMAL, TelemetryLevel.NORMAL])
def test_nothing_below_debug(level, monkeypatch):
    monkeypatch.setattr("nissa.telemetry.debug_stats.launch_layer_stats", lambda *_: pytest.fail("collected"))
    assert debug_layer_payloads("host", _model().named_parameters(), level) == []


def test_large_models_are_split_across_events():
    params = []
    for i in range(LAYERS_PER_EVENT + 3):
        p = torch.nn.Parameter(torch.ones(2))
        p.grad = torch.ones(2)
        params.append((f"p{i}", p))
    payloads = debug_layer_payloads("big", params, TelemetryLevel.DEBUG)
    assert [len(p.layers) for p in payloads] == [LAYERS_PER_EVENT, 3]


def test_chunked_collections_give_the_same_rows(monkeypatch):
    """A model larger than one concatenation is collected chunk by chunk, a large layer alone: same figures."""
    model = _model()
    whole = collect_layer_stats(model.named_parameters())
    monkeypatch.setattr("nissa.telemetry.debug_stats.CHUNK_ELEMENTS", 50)  # the conv weight (108) alone
    chunked = collect_layer_stats(model.named_parameters())
    assert [s.name for s in chunked] == [s.name for s in whole]
    for a, b in zip(chunked, whole, strict=True):
        for field in ("grad_norm", "grad_mean", "grad_std", "grad_abs_max", "weight_norm"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-6, abs=1e-9), (a.name, field)
