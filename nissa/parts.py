"""The parts a run is made of, for a loop that wires its own (``nissa.init`` wires them for every other loop).

- A run by hand: ``HubConfig`` and ``NissaHub`` (the local log first, then the stream), ``RuntimeConfig`` and
  ``build_runtime`` (a ``Runtime``: the hub plus commands applied at step boundaries, seen by a loop as
  ``LoopHooks``), ``agree_on_run`` and ``checked_run_id`` (the run id every rank shares), ``run_metadata`` and
  ``flat_config`` (what ``run_started`` carries), ``check_servers`` (a ``--server`` flag's URLs), ``upload_run``.
- Commands: a handler of a loop's own (``Run.handle``) takes a ``CommandContext`` and raises ``CommandRejected`` to
  refuse; ``CommandHandler`` is its protocol, ``CommandProcessor`` applies them; ``Handles`` is ``Run.handle``'s
  signature (by request type: ``CheckpointRequest``, ``StopRequest``).
- What runs beside a loop: ``install_profiling``, ``open_start_windows``, ``install_rank_checks``,
  ``answer_stacks``, ``start_watchdog``, ``SystemConfig`` and ``start_system_metrics``.
- Collectors' building blocks, one device read per collection: ``DeviceFigures``, ``StreamFence`` and ``read_all``;
  distributions (``PendingHistograms``, ``launch_histograms``, ``distribution``, ``segmented_histograms``, and
  ``SegmentCache``, the layouts a collector repeats, kept by that collector); per-layer debug statistics
  (``PendingLayers``, ``launch_layer_stats``, ``layer_rows``, ``layer_histograms``, ``debug_histogram_payloads``,
  ``debug_distribution_names``, ``DEBUG_BINS``); phase timing (``PhaseTimer``) and host-sync counting
  (``HostSyncCounter``).

Each name is loaded on first use (``nissa.parts.NissaHub`` imports the hub, the collectors' parts torch), so a
CLI that checks its flags with ``check_servers`` starts without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nissa.lazy import attach

if TYPE_CHECKING:  # the parts, listed once: the type checker reads them, ``nissa.lazy`` loads them
    from nissa.control.commands import CommandContext as CommandContext
    from nissa.control.commands import CommandHandler as CommandHandler
    from nissa.control.commands import CommandProcessor as CommandProcessor
    from nissa.control.commands import CommandRejected as CommandRejected
    from nissa.control.commands import Handles as Handles
    from nissa.diagnostics import answer_stacks as answer_stacks
    from nissa.diagnostics import start_watchdog as start_watchdog
    from nissa.histogram import PendingHistograms as PendingHistograms
    from nissa.histogram import SegmentCache as SegmentCache
    from nissa.histogram import distribution as distribution
    from nissa.histogram import launch_histograms as launch_histograms
    from nissa.histogram import segmented_histograms as segmented_histograms
    from nissa.hub import HubConfig as HubConfig
    from nissa.hub import NissaHub as NissaHub
    from nissa.hub.config import check_servers as check_servers
    from nissa.hub.upload import upload_run as upload_run
    from nissa.join import agree_on_run as agree_on_run
    from nissa.join import checked_run_id as checked_run_id
    from nissa.metadata import flat_config as flat_config
    from nissa.metadata import run_metadata as run_metadata
    from nissa.runtime import LoopHooks as LoopHooks
    from nissa.runtime import Runtime as Runtime
    from nissa.runtime import RuntimeConfig as RuntimeConfig
    from nissa.runtime import build_runtime as build_runtime
    from nissa.system import SystemConfig as SystemConfig
    from nissa.system import start_system_metrics as start_system_metrics
    from nissa.telemetry.debug_stats import DEBUG_BINS as DEBUG_BINS
    from nissa.telemetry.debug_stats import PendingLayers as PendingLayers
    from nissa.telemetry.debug_stats import debug_distribution_names as debug_distribution_names
    from nissa.telemetry.debug_stats import debug_histogram_payloads as debug_histogram_payloads
    from nissa.telemetry.debug_stats import launch_layer_stats as launch_layer_stats
    from nissa.telemetry.debug_stats import layer_histograms as layer_histograms
    from nissa.telemetry.debug_stats import layer_rows as layer_rows
    from nissa.telemetry.install import install_profiling as install_profiling
    from nissa.telemetry.install import install_rank_checks as install_rank_checks
    from nissa.telemetry.install import open_start_windows as open_start_windows
    from nissa.telemetry.phases import PhaseTimer as PhaseTimer
    from nissa.telemetry.readback import DeviceFigures as DeviceFigures
    from nissa.telemetry.readback import StreamFence as StreamFence
    from nissa.telemetry.readback import read_all as read_all
    from nissa.telemetry.syncs import HostSyncCounter as HostSyncCounter

__getattr__, __all__ = attach(__name__, __file__)
