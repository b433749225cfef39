"""Device decisions made once per run, and the progress display."""

import io

import pytest
import torch

from trainer.simic.progress import Progress
from trainer.simic.runtime import DeviceRuntime, resolve_amp_dtype, resolve_device
from trainer.simic.vectorized import RoundResult


def test_amp_auto_is_full_precision_on_cpu_and_explicit_choices_hold_anywhere():
    cpu, cuda = torch.device("cpu"), torch.device("cuda:0")
    assert resolve_amp_dtype("auto", cpu) is None and resolve_amp_dtype("off", cpu) is None
    assert resolve_amp_dtype("bfloat16", cpu) is torch.bfloat16
    assert resolve_amp_dtype("float16", cpu) is torch.float16
    ampere = {0: (8, 0)}.__getitem__
    assert resolve_amp_dtype("float16", cuda, ampere) is torch.float16
    assert resolve_amp_dtype("bfloat16", cuda, ampere) is torch.bfloat16
    assert resolve_amp_dtype("off", cuda, ampere) is None


@pytest.mark.skipif(bool(torch.version.hip), reason="ROCm builds take torch's bf16 answer")
def test_amp_auto_picks_bf16_only_where_native_on_the_configured_device():
    # V100 (7.0) and T4 (7.5) emulate bf16 (torch.cuda.is_bf16_supported() says True for them);
    # A100 (8.0) and H100 (9.0) have it natively. The current device (0) is a V100 here.
    capability = {0: (7, 0), 1: (8, 0), 2: (7, 5), 3: (9, 0)}.__getitem__
    picked = {i: resolve_amp_dtype("auto", torch.device(f"cuda:{i}"), capability) for i in range(4)}
    assert picked == {0: torch.float16, 1: torch.bfloat16, 2: torch.float16, 3: torch.bfloat16}
    assert DeviceRuntime(torch.device("cpu"), picked[0], 1).uses_scaler
    assert not DeviceRuntime(torch.device("cpu"), picked[1], 1).uses_scaler


def test_cpu_runtime_has_no_streams_and_no_scaler():
    rt = DeviceRuntime.create("cpu", "auto", 3)
    assert rt.streams == [None, None, None] and rt.new_scaler() is None and not rt.uses_scaler
    with rt.on_env_stream(2), rt.autocast():
        assert not torch.is_autocast_enabled()
    rt.streams_wait_default()
    rt.default_waits_streams()


def test_float16_is_the_only_dtype_with_a_scaler():
    assert DeviceRuntime(torch.device("cpu"), torch.float16, 1).uses_scaler
    assert not DeviceRuntime(torch.device("cpu"), torch.bfloat16, 1).uses_scaler


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without CUDA")
def test_cuda_without_cuda_is_an_error():
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda")
    assert resolve_device("auto") == torch.device("cpu")


def test_progress_writes_one_line_per_round():
    out = io.StringIO()
    progress = Progress(rounds=2, stream=out)
    progress.epoch(1, 1, [0.5])  # not a tty: no live line
    progress.round(RoundResult(1, [1.0, 3.0], [0.5, 0.7], 1, 0, None))
    progress.round(RoundResult(2, [2.0, 2.0], [0.6, 0.6], 0, 2, None))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("round 1/2  acc 0.600  return +2.00  fossilized 1  pruned 0")
