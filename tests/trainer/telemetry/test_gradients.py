"""The gradient collector against a float64 reference, in the precisions and magnitudes that break naive norms."""

from __future__ import annotations

import math

import pytest
import torch

from leyline import GradientHealth, decode_event, encode_event, make_event
from nissa.telemetry.syncs import HostSyncCounter
from trainer.telemetry.gradients import (
    GradientStats,
    GradientThresholds,
    collect_gradients,
    seed_gradient_ratio,
)


def _params(*grads: torch.Tensor) -> list[torch.nn.Parameter]:
    params = []
    for g in grads:
        p = torch.nn.Parameter(torch.zeros_like(g))
        p.grad = g.clone()
        params.append(p)
    return params


def _reference(grads: list[torch.Tensor]) -> tuple[float, list[float]]:
    """Exact norms: every element in float64, all gradients concatenated for the global one."""
    per = [float(torch.linalg.vector_norm(g.double())) for g in grads]
    total = float(torch.linalg.vector_norm(torch.cat([g.double().reshape(-1) for g in grads])))
    return total, per


def test_float32_matches_float64_reference():
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(64, 32, generator=gen), torch.randn(32, generator=gen) * 1e-3,
             torch.randn(3, 3, 8, 8, generator=gen) * 10]
    stats = collect_gradients("host", _params(*grads), GradientThresholds(exploding=1e3)).resolve()
    total, per = _reference(grads)
    assert stats.global_norm == pytest.approx(total, rel=1e-6)
    assert stats.max_tensor_norm == pytest.approx(max(per), rel=1e-6)
    assert stats.n_tensors == 3 and stats.n_params == sum(g.numel() for g in grads)
    assert stats.nonfinite == 0 and not stats.vanishing and not stats.exploding


def test_global_norm_is_the_l2_norm_not_an_average():
    # Two tensors of norm 3 and 4: the norm of everything is 5, not (3 + 4) / 2 or 25 ** 0.5 / 2.
    stats = collect_gradients("s", _params(torch.tensor([3.0]), torch.tensor([0.0, 4.0]))).resolve()
    assert stats.global_norm == pytest.approx(5.0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_large_low_precision_gradients_do_not_overflow(dtype):
    # 1e3 squared is 1e6, past float16's 65504: a g * g sum in the gradient's own dtype is inf.
    grads = [torch.full((200_000,), 1e3, dtype=dtype), torch.full((10,), -7.0, dtype=dtype)]
    naive = sum((g * g).sum() for g in grads)
    if dtype == torch.float16:
        assert math.isinf(float(naive))  # the failure this collector must not have
    stats = collect_gradients("seed", _params(*grads), GradientThresholds(exploding=1e9)).resolve()
    total, per = _reference(grads)
    assert math.isfinite(stats.global_norm)
    # Within float32 accumulation error over 200k terms (torch's own CPU reduction does no better).
    assert stats.global_norm == pytest.approx(total, rel=1e-4)
    assert stats.max_tensor_norm == pytest.approx(max(per), rel=1e-4)
    assert stats.nonfinite == 0


def test_a_float32_sum_of_squares_overflow_gets_its_true_norm():
    grads = [torch.full((1000,), 1e20), torch.ones(4)]
    stats = collect_gradients("host", _params(*grads)).resolve()
    total, _ = _reference(grads)
    assert stats.nonfinite == 0, "finite gradients must not be counted as NaN/Inf"
    assert stats.global_norm == pytest.approx(total, rel=1e-6)
    assert stats.exploding


def test_an_overflowing_norm_is_measured_before_the_loop_clips_in_place():
    # The loop collects, then clips in place (its total norm overflows float32, so the clip
    # coefficient is 0 and every gradient becomes 0), and reads the collection only later.
    params = _params(torch.full((1000,), 1e20), torch.ones(4))
    total, _ = _reference([p.grad for p in params])
    pending = collect_gradients("host", params)
    torch.nn.utils.clip_grad_norm_(params, 5.0, foreach=True)
    assert float(params[0].grad.abs().max()) == 0.0  # what a re-measure at resolve time would see
    stats = pending.resolve()
    assert stats.global_norm == pytest.approx(total, rel=1e-6) and stats.nonfinite == 0


def test_each_collection_carries_a_fence_the_read_waits_on():
    # CPU runs ops to completion in program order: there is no stream to race here. What CPU can
    # show is the wiring: every collection records a fence at launch, and the read waits on each
    # fence before its one transfer (the race itself is exercised by the CUDA-only test).
    from trainer.telemetry.gradients import resolve_all

    pendings = [collect_gradients(f"s{i}", _params(torch.randn(3))) for i in range(3)]
    assert all(not p.fence.waited and not p.fence.on_stream for p in pendings)
    resolve_all(pendings)
    assert all(p.fence.waited for p in pendings)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA streams")
def test_norms_launched_on_a_side_stream_are_read_after_they_are_computed():
    device = torch.device("cuda")
    side = torch.cuda.Stream(device)
    params = _params(*(torch.full((1 << 20,), 2.0, device=device) for _ in range(4)))
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # the side stream is still busy when the read is queued
        pending = collect_gradients("host", params)
    stats = pending.resolve()  # read from the default stream
    assert stats.global_norm == pytest.approx(2.0 * math.sqrt(4 * (1 << 20)), rel=1e-9)


def test_nan_and_inf_are_counted_and_travel_as_none():
    grads = [torch.tensor([1.0, float("nan")]), torch.tensor([float("inf")]), torch.ones(2)]
    stats = collect_gradients("host", _params(*grads)).resolve()
    assert stats.nonfinite == 2 and stats.exploding and not stats.finite
    assert stats.max_tensor_norm == pytest.approx(math.sqrt(2))
    payload = stats.payload()
    assert payload.global_norm is None and payload.nonfinite == 2
    event = decode_event(encode_event(make_event(payload, run_id="r", seq=1, ts=0.0)))
    assert isinstance(event.payload, GradientHealth) and event.payload.global_norm is None


def test_mixed_dtypes_keep_parameter_order():
    grads = [torch.full((4,), 2.0, dtype=torch.bfloat16), torch.full((9,), 1.0),
             torch.full((1,), 5.0, dtype=torch.float64)]
    pending = collect_gradients("policy", _params(*grads))
    stats = pending.resolve()
    total, per = _reference(grads)
    assert stats.global_norm == pytest.approx(total, rel=1e-6)
    assert stats.max_tensor_norm == pytest.approx(5.0)


def test_vanishing_and_exploding_flags():
    t = GradientThresholds(vanishing=1e-6, exploding=10.0)
    assert collect_gradients("a", _params(torch.full((4,), 1e-9)), t).resolve().vanishing
    assert collect_gradients("a", _params(torch.full((4,), 100.0)), t).resolve().exploding
    ok = collect_gradients("a", _params(torch.full((4,), 1.0)), t).resolve()
    assert not ok.vanishing and not ok.exploding
    with pytest.raises(ValueError):
        GradientThresholds(vanishing=1.0, exploding=0.5)


def test_no_gradients_is_not_measured():
    p = torch.nn.Parameter(torch.zeros(3))
    stats = collect_gradients("empty", [p]).resolve()
    assert stats.global_norm is None and stats.n_tensors == 0
    assert stats.payload().global_norm is None


def test_collection_reads_the_device_once_and_resolve_is_idempotent():
    grads = [torch.randn(5) for _ in range(20)]
    pending = collect_gradients("host", _params(*grads))
    with HostSyncCounter(torch.device("cpu")) as syncs:
        first = pending.resolve()
        second = pending.resolve()
    assert first is second
    assert syncs.count == 1, f"one transfer of the stacked per-tensor norms: {syncs.by_call}"


def test_collect_from_a_real_backward():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    torch.nn.functional.cross_entropy(model(torch.randn(32, 8)), torch.randint(0, 3, (32,))).backward()
    stats = collect_gradients("host", model.parameters()).resolve()
    total, _ = _reference([p.grad for p in model.parameters()])
    assert stats.global_norm == pytest.approx(total, rel=1e-6)
    # clip_grad_norm_ reports the same total norm.
    assert stats.global_norm == pytest.approx(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)), rel=1e-6)


def _stats(norm: float, n_params: int) -> GradientStats:
    return GradientStats(scope="x", global_norm=norm, max_tensor_norm=norm, n_tensors=1, n_params=n_params,
                         nonfinite=0, vanishing=False, exploding=False)


def test_seed_gradient_ratio_scales_by_parameter_counts_and_clamps():
    host, seed = _stats(2.0, 10_000), _stats(0.1, 100)
    assert seed_gradient_ratio(seed, host) == pytest.approx((0.1 / 2.0) * math.sqrt(100))
    assert seed_gradient_ratio(_stats(100.0, 100), host) == 10.0
    assert seed_gradient_ratio(seed, _stats(0.0, 10)) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_no_temporary_the_size_of_all_gradients(dtype):
    # The profiler's memory records show every allocation the collection makes on the CPU.
    params = _params(*[torch.randn(100_000).to(dtype) for _ in range(10)])
    total_bytes = sum(p.grad.numel() * p.grad.element_size() for p in params)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        collect_gradients("host", params).resolve()
    largest = max(e.cpu_memory_usage for e in prof.events())
    # At most one tensor's worth in float64 (torch's CPU kernel upcasts one gradient at a time to
    # accumulate in float64), never all of them.
    assert largest <= 8 * 100_000 < total_bytes


def test_resolve_all_reads_many_collections_in_one_transfer():
    from trainer.telemetry.gradients import resolve_all

    sets = [[torch.randn(7), torch.randn(3, 3)], [torch.full((5,), 2.0)], []]
    pendings = [collect_gradients(f"s{i}", _params(*g)) for i, g in enumerate(sets)]
    with HostSyncCounter(torch.device("cpu")) as syncs:
        stats = resolve_all(pendings)
    assert syncs.count == 1, syncs.by_call
    for s, grads in zip(stats, sets, strict=True):
        if grads:
            assert s.global_norm == pytest.approx(_reference(grads)[0], rel=1e-6)
        else:
            assert s.global_norm is None
    assert [s.scope for s in stats] == ["s0", "s1", "s2"]
