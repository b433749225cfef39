"""Profile windows: a fresh ``torch.profiler.profile`` over N training batches, exported once.

A window's schedule is ``wait=0, warmup=1, active=N, repeat=1``: the batch after the
window opens warms the profiler up (its first-call costs stay out of the figures), the
next N are recorded, and the step after the last of them makes the trace ready. The
trace is written once, as Chrome trace JSON named ``<worker>.pt.trace.json`` under
``<log-dir>/<run_id>/profiles/<window>/``: TensorBoard's profiler plugin reads that
layout (one window = one run of the plugin) and Perfetto opens the file directly. In a run of
several ranks every rank records the same window (the ranks apply the command at the same step),
its file named ``rank<N>.<worker>…`` in the same folder, each carrying torch.distributed's
``distributedInfo``: the folder is one N-rank job for Holistic Trace Analysis.

Activities come from ``torch.profiler.supported_activities()``: CPU always, CUDA only
when the build supports it and a device is present, other accelerators as reported.
"""

from __future__ import annotations

import logging
import os
import pathlib
import platform
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity

from leyline import TopOp
from nissa.telemetry.phases import cut_phase_ranges
from nissa.telemetry.quiet import without_profiler_markers

logger = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class ProfileConfig:
    """How windows record and how much of their summary travels in the completion event."""

    top_k: int = 15
    """Operators in the summary, by total CPU time (plus the top by CUDA time where recorded)."""
    record_shapes: bool = False
    """Record input shapes (costs time; groups ops by shape in TensorBoard)."""
    profile_memory: bool = False
    """Record tensor allocations."""
    with_stack: bool = False
    """Record Python stacks (large traces)."""

    def __post_init__(self) -> None:
        if not 1 <= self.top_k <= 100:
            raise ValueError(f"top_k must be in 1..100, got {self.top_k}")


def profile_activities(device: str | torch.device | None = None) -> list[ProfilerActivity]:
    """What this build and machine can record: CUDA only where supported and a device is present, and the
    run's ``device`` (where known) is a CUDA one: a CPU run on a machine with a GPU has no CUDA time to report."""
    on_cuda = device is None or str(device) == "auto" or torch.device(device).type == "cuda"
    out: list[ProfilerActivity] = []
    for activity in torch.profiler.supported_activities():
        # pybind enums compare with ==, not is
        if activity == ProfilerActivity.CUDA and not (on_cuda and torch.cuda.is_available()):
            continue
        out.append(activity)
    return sorted(out, key=lambda a: a.name)


def profiles_dir(log_dir: pathlib.Path, run_id: str) -> pathlib.Path:
    return pathlib.Path(log_dir) / run_id / "profiles"


@dataclass(frozen=True)
class WindowResult:
    """A finished window: its trace file, how many batches it recorded, and the top operators."""

    window: str
    trace_path: pathlib.Path
    batches: int
    wall_s: float
    top_ops: list[TopOp]
    partial: bool


def summarise(prof: torch.profiler.profile, top_k: int, with_cuda: bool) -> list[TopOp]:
    """The operators that cost most: top ``top_k`` by total CPU time, then any top-by-CUDA-time not in it."""
    # Operators only: the step markers and the loop's phase ranges (user annotations) contain them.
    events = [e for e in prof.key_averages()
              if not e.key.startswith("ProfilerStep") and not getattr(e, "is_user_annotation", False)]
    by_cpu = sorted(events, key=lambda e: e.cpu_time_total, reverse=True)[:top_k]
    chosen = list(by_cpu)
    if with_cuda:
        by_cuda = sorted(events, key=lambda e: e.device_time_total, reverse=True)[: max(1, top_k // 3)]
        chosen += [e for e in by_cuda if e not in by_cpu and e.device_time_total > 0]
    return [TopOp(name=e.key, calls=int(e.count), cpu_time_us=float(e.cpu_time_total),
                  self_cpu_time_us=float(e.self_cpu_time_total),
                  cuda_time_us=float(e.device_time_total) if with_cuda else None)
            for e in chosen]


class ProfileWindow:
    """One profiling window over ``batches`` training batches; ``step()`` once per batch."""

    def __init__(self, name: str, batches: int, trace_dir: pathlib.Path,
                 config: ProfileConfig | None = None, rank: int | None = None,
                 device: str | torch.device | None = None, quiesce: Callable[[], None] | None = None) -> None:
        if batches < 1:
            raise ValueError(f"batches must be >= 1, got {batches}")
        self.name = _SAFE.sub("-", name)
        self.batches = batches
        self.trace_dir = pathlib.Path(trace_dir)
        self.config = config or ProfileConfig()
        self.rank = rank
        self.activities = profile_activities(device)
        self._quiesce = quiesce or (lambda: None)
        """Called before the profiler starts, steps or stops: what else runs torch code now finishes first
        (the ranks' exchange in flight, ``Runtime.settle_collectives``)."""
        self._prof: torch.profiler.profile | None = None
        self._trace_path: pathlib.Path | None = None
        self._steps = 0
        self._t0 = 0.0
        self.result: WindowResult | None = None

    @property
    def activity_names(self) -> list[str]:
        return [a.name for a in self.activities]

    @property
    def open(self) -> bool:
        return self._prof is not None

    @property
    def done(self) -> bool:
        return self.result is not None

    def start(self) -> None:
        """Open the profiler; the next batch is the warm-up."""
        if self._prof is not None or self.result is not None:
            raise RuntimeError(f"profile window {self.name} was already started")
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        c = self.config
        self._prof = torch.profiler.profile(
            activities=self.activities,
            schedule=torch.profiler.schedule(wait=0, warmup=1, active=self.batches, repeat=1),
            on_trace_ready=self._export, record_shapes=c.record_shapes, profile_memory=c.profile_memory,
            with_stack=c.with_stack,
        )
        self._t0 = time.perf_counter()
        self._quiesce()
        with without_profiler_markers():
            self._prof.start()
        cut_phase_ranges()  # the phase the loop is in already gets its range

    def step(self) -> bool:
        """One training batch ended; True once the window has finished (trace written, summary ready)."""
        if self._prof is None:
            return self.done
        self._steps += 1
        cut_phase_ranges(reopen=False)  # each step's trace carries the phases it ran in
        self._quiesce()
        with without_profiler_markers():  # the window's first and last steps write them
            self._prof.step()
        cut_phase_ranges()
        if self._trace_path is not None:  # the schedule's last active batch just ended
            self._finish(partial=False)
        return self.done

    def stop(self) -> WindowResult | None:
        """Close early (the run ends): whatever was recorded is exported; None if nothing was."""
        if self._prof is not None:
            self._finish(partial=True)
        return self.result

    def _export(self, prof: torch.profiler.profile) -> None:
        # Called by the profiler exactly once (repeat=1), when the active batches are recorded.
        who = "" if self.rank is None else f"rank{self.rank}."
        worker = _SAFE.sub("-", f"{who}{platform.node() or 'host'}_{os.getpid()}")
        path = self.trace_dir / f"{worker}.{self.name}.pt.trace.json"
        prof.export_chrome_trace(str(path))
        self._trace_path = path

    def _finish(self, *, partial: bool) -> None:
        prof, self._prof = self._prof, None
        if prof is None:
            return
        cut_phase_ranges(reopen=False)
        self._quiesce()
        with without_profiler_markers():
            prof.stop()  # a window stopped during its active batches exports what it has here
        recorded = max(0, min(self._steps - 1, self.batches))
        if self._trace_path is None:
            logger.info("profile window %s closed before recording anything", self.name)
            return
        with_cuda = ProfilerActivity.CUDA in self.activities
        self.result = WindowResult(window=self.name, trace_path=self._trace_path, batches=recorded,
                                   wall_s=time.perf_counter() - self._t0,
                                   top_ops=summarise(prof, self.config.top_k, with_cuda), partial=partial)
        logger.info("profile window %s: %d batches, trace %s", self.name, recorded, self._trace_path)
