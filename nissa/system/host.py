"""The host's side of a system sample, through psutil: CPU, load, memory, this process's RSS, disk and network.

Rates (CPU busy share, bytes per second) are deltas since the previous sample, over the probe's own clock:
the first sample primes them and reports only what needs no delta. CPU busy share is computed from
``cpu_times`` here rather than ``psutil.cpu_percent``, whose state is global to the process (another caller
would steal our deltas).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from leyline import CpuStats, DiskStats, MemoryStats, NetworkStats

logger = logging.getLogger(__name__)

_IDLE_FIELDS = ("idle", "iowait")


class HostProbe:
    """Samples the host; every figure it cannot read is ``None`` (never an exception)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        import psutil

        self._ps = psutil
        self._clock = clock
        self._process = psutil.Process(os.getpid())
        self._cpu_count = psutil.cpu_count() or 1
        self._at = clock()
        self._cpu = self._cpu_totals()
        self._proc_cpu = self._process_cpu()
        self._disk = self._counters(psutil.disk_io_counters)
        self._net = self._counters(psutil.net_io_counters)

    def sample(self) -> tuple[CpuStats, MemoryStats, DiskStats | None, NetworkStats | None]:
        now = self._clock()
        dt = now - self._at
        self._at = now
        cpu, self._cpu = self._cpu, self._cpu_totals()
        proc_cpu, self._proc_cpu = self._proc_cpu, self._process_cpu()
        disk, self._disk = self._disk, self._counters(self._ps.disk_io_counters)
        net, self._net = self._net, self._counters(self._ps.net_io_counters)
        cpu_stats = CpuStats(percent=_busy(cpu, self._cpu), load_1m=self._load(),
                             process_percent=_rate(proc_cpu, self._proc_cpu, dt, 100.0))
        disk_stats = None if self._disk is None else DiskStats(
            read_bytes_per_s=_field_rate(disk, self._disk, "read_bytes", dt),
            write_bytes_per_s=_field_rate(disk, self._disk, "write_bytes", dt))
        net_stats = None if self._net is None else NetworkStats(
            recv_bytes_per_s=_field_rate(net, self._net, "bytes_recv", dt),
            sent_bytes_per_s=_field_rate(net, self._net, "bytes_sent", dt))
        return cpu_stats, self._memory(), disk_stats, net_stats

    def _cpu_totals(self) -> tuple[float, float] | None:
        try:
            times = self._ps.cpu_times()
        except (self._ps.Error, OSError):
            return None
        total = sum(times)
        idle = sum(getattr(times, f, 0.0) for f in _IDLE_FIELDS)
        return total, total - idle

    def _process_cpu(self) -> float | None:
        try:
            t = self._process.cpu_times()
        except (self._ps.Error, OSError):
            return None
        return t.user + t.system

    def _load(self) -> float | None:
        try:
            return float(self._ps.getloadavg()[0])
        except (AttributeError, OSError):
            return None

    def _memory(self) -> MemoryStats:
        try:
            vm = self._ps.virtual_memory()
            host = {"percent": float(vm.percent), "used_bytes": float(vm.total - vm.available),
                    "total_bytes": float(vm.total)}
        except (self._ps.Error, OSError):
            host = {}
        try:
            rss: float | None = float(self._process.memory_info().rss)
        except (self._ps.Error, OSError):
            rss = None
        return MemoryStats(process_rss_bytes=rss, **host)

    def _counters(self, read: Callable[..., Any]) -> Any:
        try:
            return read()
        except (self._ps.Error, OSError, RuntimeError):  # RuntimeError: psutil's "couldn't find any disks"
            return None


def _busy(before: tuple[float, float] | None, after: tuple[float, float] | None) -> float | None:
    if before is None or after is None:
        return None
    total = after[0] - before[0]
    if total <= 0:
        return None
    return max(0.0, min(100.0, 100.0 * (after[1] - before[1]) / total))


def _rate(before: float | None, after: float | None, dt: float, scale: float = 1.0) -> float | None:
    if before is None or after is None or dt <= 0 or after < before:
        return None  # a counter that went back (reset, wrapped) measures nothing this time
    return scale * (after - before) / dt


def _field_rate(before: Any, after: Any, field: str, dt: float) -> float | None:
    if before is None or after is None:
        return None
    return _rate(getattr(before, field), getattr(after, field), dt)
