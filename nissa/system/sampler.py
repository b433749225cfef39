"""``SystemSampler``: one named daemon thread per rank that samples the machine every ``interval_s`` and emits
a ``system`` event (``leyline.SystemMetrics``) through the run's hub, stamped with the step the loop is at.

The training thread only starts and stops it. Opening the probes (psutil, NVML's ``nvmlInit``) happens on
the sampler's thread; a sample costs a few system calls there, and the hub's ``emit`` is a deque append, so
the loop pays nothing per step but the thread's share of the GIL (measured in ``bench/telemetry_overhead.py``).
A machine without a GPU library gets one line at INFO, once per process. The sampler never raises into the
loop: a probe that fails ends sampling with one logged error, the run goes on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from leyline import SystemMetrics
from nissa.system.gpu import GpuProbe, open_gpus
from nissa.system.host import HostProbe

if TYPE_CHECKING:
    from nissa.runtime import Runtime

logger = logging.getLogger(__name__)

MIN_INTERVAL_S = 0.05
MAX_INTERVAL_S = 3600.0
_noted = False


@dataclass(frozen=True)
class SystemConfig:
    """What the sampler samples and how often."""

    interval_s: float = 10.0
    """Seconds between samples."""
    device: str | None = None
    """The run's device: ``cuda:N`` samples that GPU only; otherwise every GPU the process sees."""
    gpus: bool = True
    """Sample GPUs (off: host figures only)."""

    def __post_init__(self) -> None:
        check_interval(self.interval_s)


def check_interval(seconds: object) -> None:
    """Seconds between samples: ``MIN_INTERVAL_S`` to ``MAX_INTERVAL_S``."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or \
            not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        raise ValueError(f"system metrics interval must be in {MIN_INTERVAL_S}..{MAX_INTERVAL_S:g} seconds, "
                         f"got {seconds!r}")


class SystemSampler:
    """Samples the machine on its own thread and hands each sample to ``emit``; see the module docstring."""

    def __init__(self, emit: Callable[[SystemMetrics], None], config: SystemConfig | None = None, *,
                 name: str = "nissa-system", open_host: Callable[[], HostProbe] = HostProbe,
                 open_gpu: Callable[[str | None], tuple[GpuProbe | None, str]] = open_gpus) -> None:
        self.config = config or SystemConfig()
        self._emit = emit
        self._open_host, self._open_gpu = open_host, open_gpu
        self._host: HostProbe | None = None
        self._gpu: GpuProbe | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.samples = 0

    def start(self) -> SystemSampler:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Take a last sample (a run shorter than one interval still has one) and end the thread."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.warning("the system metrics thread did not stop within %.1f s", timeout)

    def open(self) -> None:
        """Open the probes (done by the thread; tests and the benchmark call it to sample by hand)."""
        global _noted
        self._host = self._open_host()
        if self.config.gpus:
            self._gpu, note = self._open_gpu(self.config.device)
            if self._gpu is None and not _noted:
                _noted = True
                logger.info("system metrics: no GPU figures (%s); CPU, memory, disk and network only", note)

    def sample(self) -> SystemMetrics:
        """One sample now (rates since the previous one)."""
        assert self._host is not None, "open() first"
        cpu, memory, disk, network = self._host.sample()
        gpus = self._gpu.sample() if self._gpu is not None else []
        return SystemMetrics(cpu=cpu, memory=memory, disk=disk, network=network, gpu=gpus)

    def close(self) -> None:
        if self._gpu is not None:
            self._gpu.close()
            self._gpu = None

    def _run(self) -> None:
        try:
            self.open()
            while not self._stop.wait(self.config.interval_s):
                self._sample_once()
            self._sample_once()
        except Exception:  # a probe wraps other vendors' libraries: its failure ends sampling, never the run
            logger.exception("system metrics stopped")
        finally:
            self.close()

    def _sample_once(self) -> None:
        self._emit(self.sample())
        self.samples += 1


def start_system_metrics(runtime: Runtime, config: SystemConfig | None = None) -> Callable[[], None]:
    """Sample the machine of ``runtime``'s rank from now on, into its hub; returns the function that stops it
    (call it before the run's ``run_finished``)."""
    rank = runtime.ranks.rank
    sampler = SystemSampler(runtime.emit, config, name=f"nissa-system-r{rank}").start()
    return sampler.stop
