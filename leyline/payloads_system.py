"""System metrics: what the machine under a run was doing, sampled off the training thread.

One ``system`` event per sample and rank. Its numbers are series like any other (``leyline.series``),
named under ``system.`` by their fields::

    system.cpu.percent{rank=0}
    system.memory.process_rss_bytes{rank=0}
    system.gpu.utilization{gpu=0,rank=1}

Every field is ``None`` where it was not measured (no such counter on this machine, or no GPU library),
never 0.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from leyline.enums import EventKind, Kind
from leyline.payloads import Payload

MAX_GPUS = 64
"""GPUs one sample may describe."""


class CpuStats(msgspec.Struct, kw_only=True, frozen=True):
    """The host's processors."""

    percent: float | None = None
    """Busy share of all CPUs since the previous sample, 0–100."""
    load_1m: float | None = None
    """Load average over one minute (runnable processes)."""
    process_percent: float | None = None
    """This process's CPU use since the previous sample, in percent of one CPU (may exceed 100)."""


class MemoryStats(msgspec.Struct, kw_only=True, frozen=True):
    """The host's memory and this process's share of it."""

    percent: float | None = None
    """Memory in use on the host, 0–100."""
    used_bytes: float | None = None
    total_bytes: float | None = None
    process_rss_bytes: float | None = None
    """Resident set of this process (the rank)."""


class DiskStats(msgspec.Struct, kw_only=True, frozen=True):
    """The host's disk traffic since the previous sample, per second (all disks)."""

    read_bytes_per_s: float | None = None
    write_bytes_per_s: float | None = None


class NetworkStats(msgspec.Struct, kw_only=True, frozen=True):
    """The host's network traffic since the previous sample, per second (all interfaces)."""

    recv_bytes_per_s: float | None = None
    sent_bytes_per_s: float | None = None


class GpuStats(msgspec.Struct, kw_only=True, frozen=True):
    """One GPU the rank can see; ``name`` says which (a label of its series: ``gpu=0``)."""

    name: str
    """The GPU's index among the devices this process sees, as torch numbers them (``cuda:0`` is ``"0"``)."""
    product: str | None = None
    """What the driver calls it (``NVIDIA H100 80GB HBM3``); text, not a series."""
    utilization: float | None = None
    """Share of the last sample period in which a kernel ran, 0–100."""
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    memory_percent: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    throttle_reasons: int | None = None
    """Why the clocks are held down, the driver's bit mask (NVML's clocks event reasons, the idle bit
    left out): 0 means not throttled."""


class SystemMetrics(Payload, kw_only=True, frozen=True):
    """The machine under the run at the envelope's time: CPU, memory, disk and network I/O, each GPU."""

    KIND: ClassVar[Kind] = EventKind.SYSTEM
    cpu: CpuStats | None = None
    memory: MemoryStats | None = None
    disk: DiskStats | None = None
    network: NetworkStats | None = None
    gpu: Annotated[list[GpuStats], msgspec.Meta(max_length=MAX_GPUS)] = []
