"""nissa: the client library that puts any PyTorch training loop on a Nissa server.

    import nissa
    run = nissa.init(server="http://127.0.0.1:8765", run_name="my-run", config={"lr": 0.1})

``nissa.init`` returns a ``Run`` (``nissa.run``): ``log``, ``step``, ``watch``, ``phase``, ``command``,
``on_checkpoint``, ``on_stop``, ``finish``. Underneath: the hub (``nissa.hub``) never blocks the loop and
logs every event locally first; the command runtime (``nissa.control``, ``nissa.runtime``) applies commands
at step boundaries, at one agreed step on every rank (the ``ranks`` package); ``nissa.telemetry`` holds the debug
and profile windows. ``nissa.upload`` sends a run logged without a server to one later; ``nissa.Api`` reads a
lab's runs back (``nissa.api``), and the ``nissa`` command does from a shell (``nissa runs``).

Importing ``nissa`` imports neither torch nor the hub; ``init`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pathlib
    from collections.abc import Sequence

    from nissa.api import Api
    from nissa.control.commands import CommandContext, CommandProcessor, CommandRejected
    from nissa.diagnostics import answer_stacks, start_watchdog
    from nissa.histogram import Histogram, PendingHistograms, distribution, launch_histograms, segmented_histograms
    from nissa.hub import DeliveryReport, HubConfig, NissaHub
    from nissa.hub.rest import ServerUnavailable
    from nissa.hub.runlog import LogCorrupt
    from nissa.hub.secret import SecretError
    from nissa.hub.upload import UploadResult, upload_run
    from nissa.join import agree_on_run, checked_run_id
    from nissa.metadata import run_metadata
    from nissa.run import Run
    from nissa.runtime import Runtime, RuntimeConfig, build_runtime
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
    from nissa.telemetry.stragglers import StragglerConfig
    from nissa.telemetry.syncs import HostSyncCounter

_EXPORTS: dict[str, str] = {
    # what a loop uses
    "Api": "nissa.api", "Histogram": "nissa.histogram", "Run": "nissa.run",
    # the parts ``init`` builds a run from, for a loop that wires its own
    "HubConfig": "nissa.hub", "NissaHub": "nissa.hub", "DeliveryReport": "nissa.hub",
    "LogCorrupt": "nissa.hub.runlog", "SecretError": "nissa.hub.secret", "ServerUnavailable": "nissa.hub.rest",
    "UploadResult": "nissa.hub.upload", "upload_run": "nissa.hub.upload",
    "agree_on_run": "nissa.join", "checked_run_id": "nissa.join", "run_metadata": "nissa.metadata",
    "Runtime": "nissa.runtime", "RuntimeConfig": "nissa.runtime", "build_runtime": "nissa.runtime",
    "CommandContext": "nissa.control.commands", "CommandProcessor": "nissa.control.commands",
    "CommandRejected": "nissa.control.commands",
    "answer_stacks": "nissa.diagnostics", "start_watchdog": "nissa.diagnostics",
    "SystemConfig": "nissa.system", "start_system_metrics": "nissa.system",
    "install_profiling": "nissa.telemetry.install", "install_rank_checks": "nissa.telemetry.install",
    "open_start_windows": "nissa.telemetry.install", "StragglerConfig": "nissa.telemetry.stragglers",
    # collectors' building blocks: one device read per collection, phase timing, host-sync counting
    "PendingHistograms": "nissa.histogram", "launch_histograms": "nissa.histogram",
    "distribution": "nissa.histogram", "segmented_histograms": "nissa.histogram",
    "DEBUG_BINS": "nissa.telemetry.debug_stats", "debug_distribution_names": "nissa.telemetry.debug_stats",
    "PendingLayers": "nissa.telemetry.debug_stats", "debug_histogram_payloads": "nissa.telemetry.debug_stats",
    "launch_layer_stats": "nissa.telemetry.debug_stats", "layer_histograms": "nissa.telemetry.debug_stats",
    "layer_rows": "nissa.telemetry.debug_stats", "PhaseTimer": "nissa.telemetry.phases",
    "DeviceFigures": "nissa.telemetry.readback", "StreamFence": "nissa.telemetry.readback",
    "read_all": "nissa.telemetry.readback",
    "HostSyncCounter": "nissa.telemetry.syncs",
}
"""Each exported name and the module it is loaded from on first use (importing ``nissa`` loads none of them)."""

__all__ = [
    "DEBUG_BINS", "Api", "CommandContext", "CommandProcessor", "CommandRejected", "DeliveryReport", "DeviceFigures",
    "Histogram", "HostSyncCounter", "HubConfig", "LogCorrupt", "NissaHub", "PendingHistograms", "PendingLayers",
    "PhaseTimer", "Run", "Runtime", "RuntimeConfig", "SecretError", "ServerUnavailable", "StragglerConfig",
    "StreamFence", "SystemConfig", "UploadResult", "agree_on_run", "answer_stacks", "build_runtime", "checked_run_id",
    "debug_distribution_names", "debug_histogram_payloads", "distribution", "init", "install_profiling",
    "install_rank_checks", "launch_histograms", "launch_layer_stats", "layer_histograms", "layer_rows",
    "open_start_windows", "run_metadata", "read_all", "segmented_histograms", "start_system_metrics", "start_watchdog",
    "upload", "upload_run",
]


def init(*, server: str | None = None, run_name: str = "run", config: Mapping[str, Any] | None = None,
         log_dir: str | pathlib.Path = "nissa-runs", run_id: str | None = None, token: str | None = None,
         level: str = "NORMAL", steps_per_epoch: int = 1, device: str = "cpu", queue_size: int = 10_000,
         rank_timeout_s: float = 600.0, stack_watchdog_s: float = 0.0, project: str | None = None,
         group: str | None = None, tags: Sequence[str] | None = None, notes: str | None = None,
         summary: Mapping[str, str] | None = None, system_metrics: bool = True,
         system_metrics_s: float = 10.0, phases: Sequence[str] | None = None, heartbeat_s: float = 5.0,
         envs_per_rank: int = 0, stragglers: StragglerConfig | None = None, agree: bool = True) -> Run:
    """Start a run and return its ``Run``: the run directory ``<log_dir>/<run_id>`` with its log and stream
    secret, the hub that streams the log to the server, the command runtime. ``run_started`` (with the commands
    declared by then) goes out at the first ``run.step()``, ``run.log()`` or ``with run:``.

    - ``server``: ``http://host:port``, or several comma-separated (failover); default ``$NISSA_SERVER``;
      none: the run is only logged (``nissa.upload`` sends it later); ``""``: none, whatever ``$NISSA_SERVER`` says.
    - ``run_name``, ``config``: what the server, the console and the web page show (nested dicts are
      flattened to ``a.b`` keys). ``run_id``: default ``<run_name>-<utc time>-<random hex>``.
    - ``log_dir``: where run directories go (default ``nissa-runs``). ``token``: default ``$NISSA_TOKEN``.
    - ``level``: telemetry level, ``OFF``, ``MINIMAL``, ``NORMAL`` or ``DEBUG``.
    - ``steps_per_epoch``: an epoch (what a debug window counts) ends every that many ``run.step()``; ``0``:
      the loop calls ``run.epoch_end()``.
    - ``device``: where the loop's tensors live (``cpu``, ``cuda``, ``cuda:N``; ``auto``: CUDA if there is one);
      under torchrun a CUDA run's process group uses NCCL.
    - ``queue_size``: events the hub holds for its thread before dropping metrics (never critical events).
    - ``project``, ``group`` (a sweep, the seeds of one experiment), ``tags``, ``notes``: how the run is found
      among a lab's (``GET /runs?q=project:cifar tag:baseline``; editable later). ``summary``: how metrics are
      best, ``{"val_loss": "min", "val_acc": "max"}`` (see ``Run.define_metric``).
    - ``rank_timeout_s``: how long a collective between ranks may wait. ``stack_watchdog_s`` > 0: write every
      thread's stack under the run directory whenever no Python thread could run for that long.
    - ``system_metrics``: sample the machine (CPU, memory, disk and network I/O, each visible GPU) every
      ``system_metrics_s`` seconds on a thread of its own, as series under ``system.`` (off: ``False``).
    - ``phases``: the names of the loop's ``with run.phase(name)`` blocks a profile window of target ``update``
      may record (``["update", "validate"]``); a request for another is rejected with the reason. None: not said
      (such a window waits for its phase).
    - ``heartbeat_s``: a ``heartbeat`` event (with the step reached) this often: the server tells a hung rank,
      alive but not advancing, from a silent one by them.
    - ``envs_per_rank``: for a loop that trains several environments per rank and labels events with ``env``:
      rank r's env ``i`` is reported as ``r * envs_per_rank + i``, unique across the run (0: as given).
    - ``stragglers``: when a rank counts as slow under torchrun (``nissa.StragglerConfig``; default 1.5 times
      the others' median, 3 exchanges running). ``agree=False``: each rank applies a command at its own next
      step instead of one agreed step (only to measure what agreement costs; never for a real run).

    Under torchrun every rank calls it (the process group is joined unless the loop made it); ``stacks``
    commands are answered at once, off the loop. A bad argument is a ``ValueError`` or ``TypeError`` naming it; a
    ``log_dir`` that cannot be written is the ``OSError`` that says why (a note names ``log_dir``), a run log of
    ``run_id`` that cannot be continued ``nissa.LogCorrupt``, and a rank gone while the ranks meet
    ``ranks.RankError``.
    """
    import pathlib

    from leyline import TelemetryLevel
    from nissa import env
    from nissa.checks import check_init, check_server, resolved_device
    from nissa.hub import HubConfig
    from nissa.join import agree_on_run
    from nissa.metadata import run_metadata
    from nissa.run import Run
    from nissa.runtime import RuntimeConfig, build_runtime
    from nissa.system import SystemConfig
    from ranks import RanksConfig, join_ranks

    check_init(run_name=run_name, config=config, steps_per_epoch=steps_per_epoch, device=device,
               stack_watchdog_s=stack_watchdog_s, rank_timeout_s=rank_timeout_s, phases=phases,
               envs_per_rank=envs_per_rank, stragglers=stragglers, agree=agree)
    meta = run_metadata(project=project, group=group, tags=tags, notes=notes,
                     summary=dict(summary) if isinstance(summary, Mapping) else summary)
    if server == "":  # none, said outright
        server = None
    elif server is not None:
        check_server(server, "server")
    elif env.server():
        server = env.server()
        check_server(server, "$NISSA_SERVER")
    try:
        system = SystemConfig(interval_s=float(system_metrics_s), device=device) if system_metrics else None
    except (TypeError, ValueError) as err:
        raise ValueError(f"nissa.init: system_metrics_s: {err}") from None
    token = token if token is not None else env.token() or None
    try:
        telemetry = TelemetryLevel(str(level).upper())
    except ValueError:
        raise ValueError(f"nissa.init: level must be one of {[lv.value for lv in TelemetryLevel]}, "
                         f"got {level!r}") from None
    log_root = pathlib.Path(log_dir)
    try:
        HubConfig(run_id="check", log_dir=log_root, server=server, token=token, name=run_name,
                  queue_size=queue_size, heartbeat_s=heartbeat_s)
    except ValueError as err:
        raise ValueError(f"nissa.init: {err}") from None
    import torch.distributed as dist

    joined_here = not (dist.is_available() and dist.is_initialized())
    ranks = join_ranks(device, RanksConfig(timeout_s=rank_timeout_s))
    runtime = None
    try:
        rid = agree_on_run(ranks, log_root, run_id, run_name)
        hub = HubConfig(run_id=rid, log_dir=log_root, server=server, token=token, rank=ranks.rank, name=run_name,
                        queue_size=queue_size, heartbeat_s=heartbeat_s)
        runtime = build_runtime(RuntimeConfig(hub=hub, level=telemetry, ranks=ranks, agree=agree,
                                              env_base=ranks.rank * envs_per_rank))
        device = ranks.device_name(resolved_device(device))  # a CUDA rank's own GPU, which it samples too
        system = None if system is None else SystemConfig(interval_s=system.interval_s, device=device)
        return Run(runtime, name=run_name, config=config or {}, steps_per_epoch=steps_per_epoch, device=device,
                   close_ranks=joined_here and ranks.distributed, stack_watchdog_s=stack_watchdog_s,
                   metadata=meta, system=system, phases=None if phases is None else tuple(phases),
                   stragglers=stragglers)
    except BaseException as err:
        if isinstance(err, OSError):
            err.add_note(f"nissa.init: log_dir {str(log_root)!r}: cannot write the run's directory or log")
        if runtime is not None:
            runtime.hub.close(1.0)
        if joined_here:
            ranks.close()
        raise


def upload(run_dir: str | pathlib.Path, server: str, token: str | None = None,
           timeout: float = 60.0) -> list[UploadResult]:
    """Send a run logged without a server (or cut off from it) to ``server``, idempotently, with its traces
    and stack files; one result per rank's log says what the server holds now.

    ``FileNotFoundError`` when ``run_dir`` (``<log_dir>/<run_id>``) holds no run log, ``ValueError`` for a
    malformed ``server``, ``nissa.hub.rest.ServerUnavailable`` (naming the server) when none answers there."""
    import pathlib

    from nissa.checks import check_server
    from nissa.hub.rest import ServerUnavailable
    from nissa.hub.upload import upload_run

    check_server(server, "server", "nissa.upload")
    try:
        return upload_run(pathlib.Path(run_dir), server, token, timeout=timeout)
    except ServerUnavailable as err:
        raise ServerUnavailable(f"nissa.upload: no nissa-server answers at {server}: {err}") from None


def __getattr__(name: str) -> Any:
    """The exported names (``_EXPORTS``) are loaded on first use: ``nissa.Run``, ``nissa.Api``, …"""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nissa' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
