"""The batched step as a CUDA graph (``--cuda-graphs on``): captured once per layout, replayed every full batch.

Between lifecycle changes the batched step's shapes and tensors are fixed: the flat parameter,
gradient and momentum buffers, the stacked views, the groups' indices and blend weights (device
tensors updated in place each epoch, ``SeedGroup.set_alpha(fixed=True)``) all stay where they are.
So after a new layout the first ``WARMUP`` full batches run eagerly on a side stream (what CUDA
graph capture needs first: cuBLAS/cuDNN workspaces, autograd's stream state), the next one is
captured (``torch.cuda.graph``: one host sync per capture) and replayed, and every later full
batch only copies its images and labels into the graph's static inputs and replays it: one
launch instead of a few hundred. Batches that differ run eagerly: the last, shorter one of an
epoch, and the batches where gradient telemetry or the seeds' gradient ratio is measured (their
reads and Python bookkeeping cannot be replayed).

A capture that fails (``RuntimeError`` from the CUDA graph machinery) leaves that layout eager; it
is counted and its reason kept, and each epoch's ``phase_timing`` carries the counts as
``CompileStats`` (mode ``cuda-graph``: ``compiles`` = captures, ``recompiles`` = captures after the
first, ``eager_fallbacks`` = failed captures), as compile's fallbacks are. Autocast runs with its
weight cache off on this path, as CUDA graphs require.

Written for CUDA and exercised there; on the CPU the tests run the eager fallback and its counting
through an injected capture.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import torch

from leyline import CompileStats
from trainer.simic.batched import BatchedEnvs
from trainer.simic.batched_layout import Layout
from trainer.simic.runtime import DeviceRuntime
from trainer.simic.sites import LoopSites, NullSites

logger = logging.getLogger(__name__)

WARMUP = 3
"""Eager full batches on a side stream after each new layout, before its capture."""

Capture = Callable[[Callable[[], None]], Any]
"""Records ``step`` into a replayable graph and returns it (anything with ``replay()``)."""


def cuda_capture(step: Callable[[], None]) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


class GraphedStep:
    """Wraps ``BatchedEnvs.train_step``: replays a captured graph where it can, runs eager where not."""

    def __init__(self, batched: BatchedEnvs, batch_size: int, capture: Capture = cuda_capture) -> None:
        self.batched, self.batch_size = batched, batch_size
        self._capture = capture
        self._graph: Any = None
        self._layout: Layout | None = None
        self._eager_only = False
        self._warm = 0
        self._x: torch.Tensor | None = None
        self._y: torch.Tensor | None = None
        self.captures = self.failures = self.replays = self.eager = 0
        self.capture_s = 0.0
        self.last_reason: str | None = None
        batched.fixed_alphas = True
        runtime = batched.runtime
        if runtime.amp_dtype is not None:
            batched.autocast_ctx = torch.autocast(device_type=runtime.device.type, dtype=runtime.amp_dtype,
                                                  cache_enabled=False)

    def train_step(self, x: torch.Tensor, y: torch.Tensor, measure: bool, telemetry: bool, sites: LoopSites) -> None:
        layout = self.batched.layout
        if layout is not self._layout:  # a new layout: its own warm-up and capture
            self._layout, self._graph, self._warm, self._eager_only = layout, None, 0, False
        full = x.shape[0] == self.batch_size
        if measure or telemetry or self._eager_only or not full:
            self._eager(x, y, measure, telemetry, sites)
            return
        if self._graph is None:
            if self._warm < WARMUP:
                self._warm += 1
                self._eager(x, y, False, False, sites, side_stream=True)
                return
            if not self._record(x, y):
                self._eager(x, y, False, False, sites)
            return
        assert self._x is not None and self._y is not None
        self._x.copy_(x)
        self._y.copy_(y)
        self._graph.replay()
        self.replays += 1

    def _eager(self, x: torch.Tensor, y: torch.Tensor, measure: bool, telemetry: bool, sites: LoopSites,
               side_stream: bool = False) -> None:
        self.eager += 1
        device = self.batched.runtime.device
        if not side_stream or device.type != "cuda":
            self.batched.train_step(x, y, measure, telemetry, sites)
            return
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            self.batched.train_step(x, y, measure, telemetry, sites)
        torch.cuda.current_stream(device).wait_stream(side)

    def _record(self, x: torch.Tensor, y: torch.Tensor) -> bool:
        """Capture the step on static copies of this batch, then run it once (capture runs nothing);
        False when the capture failed (this layout then runs eagerly)."""
        self._x, self._y = x.clone(), y.clone()
        static_x, static_y, null = self._x, self._y, NullSites()
        start = time.perf_counter()
        try:
            self._graph = self._capture(lambda: self.batched.train_step(static_x, static_y, False, False, null))
        except RuntimeError as err:  # the CUDA graph machinery refuses an op or a stream use
            self.failures += 1
            self._eager_only, self._graph = True, None
            self.last_reason = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
            logger.warning("CUDA graph capture of the batched step failed, this layout runs eagerly: %s",
                           self.last_reason)
            return False
        finally:
            self.capture_s += time.perf_counter() - start
        self.captures += 1
        self._graph.replay()
        self.replays += 1
        return True

    def stats(self) -> CompileStats:
        """How capture fares, as ``phase_timing`` carries compile's figures."""
        return CompileStats(mode="cuda-graph", compiles=self.captures + self.failures,
                            recompiles=max(self.captures - 1, 0), graph_breaks=0, eager_fallbacks=self.failures,
                            compile_s=round(self.capture_s, 3), last_reason=self.last_reason)


def graphed_step(batched: BatchedEnvs | None, runtime: DeviceRuntime, batch_size: int) -> GraphedStep | None:
    """``--cuda-graphs on``: the graphed batched step; None (logged) where there is no batched step or no CUDA."""
    if batched is None:
        logger.warning("--cuda-graphs on: the envs train one by one here (see --env-exec), nothing to capture")
        return None
    if runtime.device.type != "cuda":
        logger.warning("--cuda-graphs on: %s is not a CUDA device, the batched step runs eagerly", runtime.device)
        return None
    return GraphedStep(batched, batch_size)
