"""The GPUs' side of a system sample: NVIDIA through NVML (``nvidia-ml-py``), AMD through ``amdsmi``, each
imported only when a run samples. ``open_gpus`` returns a probe, or None with one line saying why there is
none (no library, no driver, no device): a machine without GPUs is not an error.

A rank samples the GPUs its process can see, numbered as torch numbers them (``CUDA_VISIBLE_DEVICES`` /
``HIP_VISIBLE_DEVICES`` respected); a run on one named device (``cuda:1``) samples that one only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

from leyline import GpuStats

logger = logging.getLogger(__name__)


class GpuProbe(Protocol):
    def sample(self) -> list[GpuStats]: ...

    def close(self) -> None: ...


def wanted_index(device: str | None) -> int | None:
    """``cuda:1`` → 1 (sample that GPU only); ``cuda``, ``cpu``, ``auto``, None → None (every visible one)."""
    if device and ":" in device:
        kind, _, index = device.partition(":")
        if kind in ("cuda", "hip") and index.isdigit():
            return int(index)
    return None


def open_gpus(device: str | None = None) -> tuple[GpuProbe | None, str]:
    """A probe of the visible GPUs and an empty note, or None and the note saying why GPU metrics are off."""
    only = wanted_index(device)
    try:
        import pynvml
    except ImportError:
        pynvml = None
    notes = []
    if pynvml is not None:
        probe, note = _open_nvml(pynvml, only)
        if probe is not None:
            return probe, ""
        notes.append(note)
    else:
        notes.append("no NVIDIA library (pip install nvidia-ml-py)")
    try:
        import amdsmi
    except ImportError:
        amdsmi = None
    if amdsmi is not None:
        probe, note = _open_amd(amdsmi, only)
        if probe is not None:
            return probe, ""
        notes.append(note)
    return None, "; ".join(notes)


# --- NVIDIA ----------------------------------------------------------------------------------------------


def _visible(env: str | None, count: int) -> list[str]:
    """What ``CUDA_VISIBLE_DEVICES`` makes visible, in torch's order: indices or UUIDs; the list stops at the
    first entry CUDA would not accept, as CUDA does."""
    if env is None:
        return [str(i) for i in range(count)]
    out = []
    for entry in env.split(","):
        entry = entry.strip()
        if (entry.isdigit() and int(entry) < count) or entry.startswith("GPU-"):
            out.append(entry)
        else:
            break
    return out


def _open_nvml(nvml: ModuleType, only: int | None) -> tuple[GpuProbe | None, str]:
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return None, f"no NVIDIA driver answers ({err})"
    try:
        visible = _visible(os.environ.get("CUDA_VISIBLE_DEVICES"), nvml.nvmlDeviceGetCount())
        handles = []
        for index, entry in enumerate(visible):
            if only is not None and index != only:
                continue
            handle = (nvml.nvmlDeviceGetHandleByUUID(entry) if entry.startswith("GPU-")
                      else nvml.nvmlDeviceGetHandleByIndex(int(entry)))
            handles.append((str(index), handle, _text(nvml.nvmlDeviceGetName(handle))))
    except nvml.NVMLError as err:
        nvml.nvmlShutdown()
        return None, f"NVIDIA GPUs could not be listed ({err})"
    if not handles:
        nvml.nvmlShutdown()
        return None, "no NVIDIA GPU visible to this process"
    return NvmlProbe(nvml, handles), ""


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvmlProbe:
    """Samples NVIDIA GPUs; a figure a GPU does not report (``NVMLError``, e.g. not supported) is None."""

    def __init__(self, nvml: ModuleType, handles: list[tuple[str, Any, str]]) -> None:
        self._nvml = nvml
        self._handles = handles
        self._reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self._idle_bit = int(getattr(nvml, "nvmlClocksEventReasonGpuIdle", 0x1))

    def sample(self) -> list[GpuStats]:
        return [self._one(name, handle, product) for name, handle, product in self._handles]

    def _one(self, name: str, handle: Any, product: str) -> GpuStats:
        nv = self._nvml
        util = self._read(lambda: float(nv.nvmlDeviceGetUtilizationRates(handle).gpu))
        memory = self._read(lambda: nv.nvmlDeviceGetMemoryInfo(handle))
        used = None if memory is None else float(memory.used)
        total = None if memory is None else float(memory.total)
        power_mw = self._read(lambda: float(nv.nvmlDeviceGetPowerUsage(handle)))
        reasons = self._read(lambda: int(self._reasons(handle)))
        return GpuStats(
            name=name, product=product, utilization=util, memory_used_bytes=used, memory_total_bytes=total,
            memory_percent=None if not total or used is None else 100.0 * used / total,
            power_w=None if power_mw is None else power_mw / 1000.0,
            temperature_c=self._read(lambda: float(nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU))),
            sm_clock_mhz=self._read(lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))),
            throttle_reasons=None if reasons is None else reasons & ~self._idle_bit)

    def _read(self, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except self._nvml.NVMLError:
            return None

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError as err:
            logger.debug("nvmlShutdown: %s", err)


# --- AMD -------------------------------------------------------------------------------------------------


def _open_amd(amd: ModuleType, only: int | None) -> tuple[GpuProbe | None, str]:
    try:
        amd.amdsmi_init()
        handles = amd.amdsmi_get_processor_handles()
    except amd.AmdSmiException as err:
        return None, f"no AMD driver answers ({err})"
    env = os.environ.get("HIP_VISIBLE_DEVICES") or os.environ.get("ROCR_VISIBLE_DEVICES")
    visible = [int(i) for i in _visible(env, len(handles)) if i.isdigit()]
    chosen = [(str(n), handles[i]) for n, i in enumerate(visible) if only is None or n == only]
    if not chosen:
        amd.amdsmi_shut_down()
        return None, "no AMD GPU visible to this process"
    return AmdProbe(amd, chosen), ""


class AmdProbe:
    """Samples AMD GPUs through ``amdsmi``; a figure the GPU does not report is None."""

    def __init__(self, amd: ModuleType, handles: list[tuple[str, Any]]) -> None:
        self._amd = amd
        self._handles = handles

    def sample(self) -> list[GpuStats]:
        return [self._one(name, handle) for name, handle in self._handles]

    def _one(self, name: str, handle: Any) -> GpuStats:
        amd = self._amd
        activity = self._read(lambda: amd.amdsmi_get_gpu_activity(handle))
        vram = self._read(lambda: amd.amdsmi_get_gpu_vram_usage(handle))
        power = self._read(lambda: amd.amdsmi_get_power_info(handle))
        used = None if vram is None else float(vram["vram_used"]) * 2**20
        total = None if vram is None else float(vram["vram_total"]) * 2**20
        temp = self._read(lambda: amd.amdsmi_get_temp_metric(handle, amd.AmdSmiTemperatureType.EDGE,
                                                             amd.AmdSmiTemperatureMetric.CURRENT))
        clock = self._read(lambda: amd.amdsmi_get_clock_info(handle, amd.AmdSmiClkType.GFX))
        watts = None if power is None else power.get("current_socket_power", power.get("average_socket_power"))
        return GpuStats(
            name=name, utilization=None if activity is None else _num(activity.get("gfx_activity")),
            memory_used_bytes=used, memory_total_bytes=total,
            memory_percent=None if not total or used is None else 100.0 * used / total,
            power_w=_num(watts), temperature_c=_num(temp),
            sm_clock_mhz=None if clock is None else _num(clock.get("clk")))

    def _read(self, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except (self._amd.AmdSmiException, KeyError, AttributeError):
            return None

    def close(self) -> None:
        try:
            self._amd.amdsmi_shut_down()
        except self._amd.AmdSmiException as err:
            logger.debug("amdsmi_shut_down: %s", err)


def _num(value: object) -> float | None:
    """A number the library reported, or None for its "N/A" text."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
