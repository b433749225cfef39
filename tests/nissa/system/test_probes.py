"""The probes of a system sample: the host's through the real psutil (rates over an injected clock), NVIDIA's
through a stand-in for NVML (this machine has no GPU, so nvidia-ml-py cannot answer here: the stand-in
answers the calls the probe makes, as NVML documents them), and the series a sample becomes."""

from __future__ import annotations

import logging
import types

import pytest

from leyline import EventKind, GpuStats, SystemMetrics, make_event
from leyline.series import kind_of_name, points_of
from nissa.system import SystemConfig, SystemSampler
from nissa.system.gpu import NvmlProbe, open_gpus, wanted_index
from nissa.system.host import HostProbe


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_host_probe_reports_memory_at_once_and_rates_over_its_clock():
    clock = Clock()
    probe = HostProbe(clock)
    buf = bytearray(8 * 2**20)  # the process's RSS is this process's, and real
    clock.now += 2.0
    cpu, memory, disk, network = probe.sample()
    assert memory.total_bytes and memory.process_rss_bytes and memory.process_rss_bytes > len(buf)
    assert 0.0 <= memory.percent <= 100.0
    assert cpu.percent is None or 0.0 <= cpu.percent <= 100.0
    assert cpu.process_percent is not None and cpu.process_percent >= 0.0
    if network is not None:  # a container may have no counters at all: then None, never 0
        assert network.recv_bytes_per_s is not None and network.recv_bytes_per_s >= 0.0
    clock.now -= 5.0  # a clock that went back measures no rate
    cpu, _, disk, _ = probe.sample()
    assert cpu.process_percent is None
    assert disk is None or disk.read_bytes_per_s is None


class _NVMLError(Exception):
    pass


def _fake_nvml(products: list[str], *, no_power: bool = False) -> types.SimpleNamespace:
    """NVML as nvidia-ml-py exposes it, for the calls the probe makes (a GPU whose power is not supported raises
    NVMLError, as NVML_ERROR_NOT_SUPPORTED does)."""
    calls: list[str] = []

    def handle(i: int) -> dict:
        return {"index": i}

    def power(h: dict) -> int:
        if no_power and h["index"] == 1:
            raise _NVMLError("Not Supported")
        return 250_000 + h["index"]

    return types.SimpleNamespace(
        NVMLError=_NVMLError, NVML_TEMPERATURE_GPU=0, NVML_CLOCK_SM=1, nvmlClocksEventReasonGpuIdle=0x1,
        calls=calls,
        nvmlInit=lambda: calls.append("init"), nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: len(products), nvmlDeviceGetHandleByIndex=handle,
        nvmlDeviceGetHandleByUUID=lambda uuid: handle(int(uuid.rsplit("-", 1)[1])),
        nvmlDeviceGetName=lambda h: products[h["index"]].encode(),
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=30 + h["index"], memory=5),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=2 * 2**30, total=8 * 2**30, free=6 * 2**30),
        nvmlDeviceGetPowerUsage=power,
        nvmlDeviceGetTemperature=lambda h, sensor: 40 + h["index"],
        nvmlDeviceGetClockInfo=lambda h, clock: 1500 if clock == 1 else 0,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x1 | (0x4 if h["index"] == 1 else 0),
    )


def _install(monkeypatch, fake: types.SimpleNamespace) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)


def test_nvml_samples_the_visible_gpus_numbered_as_torch_numbers_them(monkeypatch):
    fake = _fake_nvml(["A100", "H100", "L4"], no_power=True)
    _install(monkeypatch, fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,1")
    probe, note = open_gpus("cuda")
    assert note == "" and isinstance(probe, NvmlProbe)
    first, second = probe.sample()
    assert (first.name, first.product, second.name, second.product) == ("0", "L4", "1", "H100")
    assert first.utilization == 32.0 and first.power_w == pytest.approx(250.002) and first.temperature_c == 42.0
    assert first.memory_used_bytes == 2 * 2**30 and first.memory_percent == pytest.approx(25.0)
    assert first.sm_clock_mhz == 1500.0
    assert first.throttle_reasons == 0 and second.throttle_reasons == 0x4  # idle is not throttling
    assert second.power_w is None  # not supported: not measured, never 0
    probe.close()
    assert fake.calls == ["init", "shutdown"]


def test_a_run_on_one_named_gpu_samples_that_one(monkeypatch):
    _install(monkeypatch, _fake_nvml(["A", "B"]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    probe, _ = open_gpus("cuda:1")
    assert [g.name for g in probe.sample()] == ["1"]
    assert wanted_index("cuda:3") == 3 and wanted_index("cuda") is None and wanted_index("cpu") is None


def test_no_gpu_is_a_note_not_an_error(monkeypatch):
    fake = _fake_nvml([])

    def fail() -> None:
        raise _NVMLError("NVML Shared Library Not Found")
    fake.nvmlInit = fail
    _install(monkeypatch, fake)
    probe, note = open_gpus(None)
    assert probe is None and "no NVIDIA driver answers (NVML Shared Library Not Found)" in note
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # not installed
    probe, note = open_gpus(None)
    assert probe is None and "no NVIDIA library" in note


def test_the_note_is_logged_once_per_process(monkeypatch, caplog):
    monkeypatch.setattr("nissa.system.sampler._noted", False)
    caplog.set_level(logging.INFO, logger="nissa.system.sampler")
    for _ in range(2):
        sampler = SystemSampler(lambda p: None, SystemConfig(), open_gpu=lambda device: (None, "no NVIDIA library"))
        sampler.open()
        assert sampler.sample().gpu == []
    notes = [r.getMessage() for r in caplog.records if "no GPU figures" in r.getMessage()]
    assert notes == ["system metrics: no GPU figures (no NVIDIA library); CPU, memory, disk and network only"]


def test_a_sample_is_series_under_system_labelled_by_gpu_and_rank():
    sample = SystemMetrics(gpu=[GpuStats(name="0", product="H100", utilization=31.0, throttle_reasons=4)])
    event = make_event(sample, run_id="r", seq=1, ts=1.0, step=7, epoch=0, rank=1)
    assert event.kind is EventKind.SYSTEM
    keys = {p.key: p.value for p in points_of(event)}
    assert keys == {"system.gpu.utilization{gpu=0,rank=1}": 31.0, "system.gpu.throttle_reasons{gpu=0,rank=1}": 4.0}
    assert kind_of_name("system.gpu.utilization") == "system"  # not a loop's own metric: charted as System


def test_the_interval_is_bounded():
    with pytest.raises(ValueError, match="interval"):
        SystemConfig(interval_s=0.0)
