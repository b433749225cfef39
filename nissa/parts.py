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

Importing it imports torch and the hub.
"""

from nissa.control.commands import CommandContext, CommandHandler, CommandProcessor, CommandRejected, Handles
from nissa.diagnostics import answer_stacks, start_watchdog
from nissa.histogram import PendingHistograms, SegmentCache, distribution, launch_histograms, segmented_histograms
from nissa.hub import HubConfig, NissaHub
from nissa.hub.config import check_servers
from nissa.hub.upload import upload_run
from nissa.join import agree_on_run, checked_run_id
from nissa.metadata import flat_config, run_metadata
from nissa.runtime import LoopHooks, Runtime, RuntimeConfig, build_runtime
from nissa.system import SystemConfig, start_system_metrics
from nissa.telemetry.debug_stats import (
    DEBUG_BINS,
    PendingLayers,
    debug_distribution_names,
    debug_histogram_payloads,
    launch_layer_stats,
    layer_histograms,
    layer_rows,
)
from nissa.telemetry.install import install_profiling, install_rank_checks, open_start_windows
from nissa.telemetry.phases import PhaseTimer
from nissa.telemetry.readback import DeviceFigures, StreamFence, read_all
from nissa.telemetry.syncs import HostSyncCounter

__all__ = [
    "CommandContext", "CommandHandler", "CommandProcessor", "CommandRejected", "DEBUG_BINS", "DeviceFigures", "Handles",
    "HostSyncCounter", "HubConfig", "LoopHooks", "NissaHub", "PendingHistograms", "PendingLayers", "PhaseTimer",
    "Runtime", "RuntimeConfig", "SegmentCache", "StreamFence", "SystemConfig", "agree_on_run", "answer_stacks",
    "build_runtime", "check_servers", "checked_run_id", "debug_distribution_names", "debug_histogram_payloads",
    "distribution", "flat_config", "install_profiling", "install_rank_checks", "launch_histograms",
    "launch_layer_stats", "layer_histograms", "layer_rows", "open_start_windows", "read_all", "run_metadata",
    "segmented_histograms", "start_system_metrics", "start_watchdog", "upload_run",
]
