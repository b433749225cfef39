"""Profile windows on CPU: warm-up then N recorded batches, one readable trace, a top-ops summary."""

from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity

from leyline import ProfileCompleted, decode_event, encode_event, make_event
from nissa.telemetry.profiler import ProfileConfig, ProfileWindow, profile_activities


def _batch(model: torch.nn.Module, opt: torch.optim.Optimizer, device: str = "cpu") -> None:
    x, y = torch.randn(16, 3, 8, 8, device=device), torch.randint(0, 4, (16,), device=device)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


@pytest.fixture
def model_opt():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 4))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def test_activities_are_what_the_build_supports():
    acts = profile_activities()
    assert ProfilerActivity.CPU in acts
    gpu = torch.cuda.is_available() and ProfilerActivity.CUDA in torch.profiler.supported_activities()
    assert (ProfilerActivity.CUDA in acts) == gpu
    assert (ProfilerActivity.CUDA in profile_activities("cuda:0")) == gpu
    assert ProfilerActivity.CUDA not in profile_activities("cpu"), "a CPU run has no CUDA time, GPU or not"


def test_cpu_window_writes_one_readable_trace_and_a_summary(tmp_path, model_opt):
    model, opt = model_opt
    window = ProfileWindow("w1", batches=3, trace_dir=tmp_path / "profiles" / "w1", config=ProfileConfig(top_k=5),
                           device="cpu")
    window.start()
    finished_at = None
    for i in range(1, 8):
        _batch(model, opt)
        if window.step() and finished_at is None:
            finished_at = i
    assert finished_at == 4, "one warm-up batch, then three recorded, ready at the step after the last"
    result = window.result
    assert result is not None and result.batches == 3 and not result.partial
    traces = list((tmp_path / "profiles" / "w1").iterdir())
    assert traces == [result.trace_path] and result.trace_path.name.endswith(".pt.trace.json")
    trace = json.loads(result.trace_path.read_text())
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert any(n.startswith("aten::") for n in names)
    assert sum(n.startswith("ProfilerStep#") for n in names) == 3  # the warm-up batch is not in the trace
    assert 1 <= len(result.top_ops) <= 5
    assert all(not op.name.startswith("ProfilerStep") for op in result.top_ops)
    cpu = [op.cpu_time_us for op in result.top_ops]
    assert cpu == sorted(cpu, reverse=True) and all(op.calls >= 1 for op in result.top_ops)
    assert all(op.cuda_time_us is None for op in result.top_ops)  # CPU-only: not measured, not 0.0
    payload = ProfileCompleted(window=result.window, batches=result.batches, trace_path=str(result.trace_path),
                               wall_s=result.wall_s, top_ops=result.top_ops)
    assert decode_event(encode_event(make_event(payload, run_id="r", seq=1, ts=0.0))).payload == payload


def test_stopping_early_exports_what_was_recorded(tmp_path, model_opt):
    model, opt = model_opt
    window = ProfileWindow("w2", batches=50, trace_dir=tmp_path)
    window.start()
    for _ in range(3):
        _batch(model, opt)
        assert not window.step()
    result = window.stop()
    assert result is not None and result.partial and result.batches == 2
    assert json.loads(result.trace_path.read_text())["traceEvents"]


def test_stopping_during_warm_up_records_nothing(tmp_path, model_opt):
    window = ProfileWindow("w3", batches=2, trace_dir=tmp_path)
    window.start()
    _batch(*model_opt)
    assert window.stop() is None and not list(tmp_path.iterdir())


def test_a_window_starts_once(tmp_path):
    window = ProfileWindow("w4", batches=1, trace_dir=tmp_path)
    window.start()
    with pytest.raises(RuntimeError):
        window.start()
    window.stop()
    with pytest.raises(ValueError):
        ProfileWindow("w5", batches=0, trace_dir=tmp_path)


def test_what_else_runs_torch_code_is_settled_before_each_start_step_and_stop(tmp_path, model_opt):
    # The profiler must not start or stop while another thread runs a collective (the ranks' exchange in
    # flight): the window settles it first, each time, with the profiler's state still unchanged.
    seen: list[bool] = []
    window = ProfileWindow("q", batches=2, trace_dir=tmp_path,
                           quiesce=lambda: seen.append(torch.autograd.profiler._is_profiler_enabled))
    window.start()
    assert seen == [False], "settled before the profiler started"
    for _ in range(3):  # the warm-up, then the two recorded batches: the last one stops it
        _batch(*model_opt)
        window.step()
    # before each step (the warm-up records nothing; the last step stops the trace), and once more at the end
    assert window.done and seen == [False, False, True, True, False]
    early = ProfileWindow("q2", batches=5, trace_dir=tmp_path, quiesce=lambda: seen.append(True))
    early.start()
    early.stop()
    assert len(seen) == 7, "a window closed early settles before it stops too"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_runs_window_reports_the_time_its_kernels_took(tmp_path, model_opt):
    model, _ = model_opt
    model = model.to("cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    window = ProfileWindow("g1", batches=2, trace_dir=tmp_path, config=ProfileConfig(top_k=6), device="cuda")
    window.start()
    while not window.done:
        _batch(model, opt, "cuda")
        window.step()
    assert ProfilerActivity.CUDA in window.activities
    timed = [op.cuda_time_us for op in window.result.top_ops]
    assert all(t is not None for t in timed) and any(t > 0 for t in timed), window.result.top_ops
