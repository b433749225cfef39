"""``nissa.Settings``: everything ``nissa.init`` takes, one frozen dataclass checked on construction.

    settings = nissa.Settings(server="http://127.0.0.1:8765", run_name="mnist", config={"lr": 0.1})
    run = nissa.init(settings)                    # or nissa.init(run_name="mnist", …): the same fields

A bad value is a ``ValueError`` or ``TypeError`` naming it, raised here, before a run directory, a hub or a
process group exists; a CLI builds its ``Settings`` from its flags and has them checked once.
"""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from leyline import TelemetryLevel
from nissa import env
from nissa.checks import check_init, check_server
from nissa.hub.config import HubConfig, check_stream
from nissa.join import checked_run_id
from nissa.metadata import RunMetadata, run_metadata
from nissa.system.sampler import SystemConfig, check_interval
from nissa.telemetry.stragglers import StragglerConfig


@dataclass(frozen=True)
class Settings:
    """How a run starts and streams (``nissa.init``'s arguments); see the module docstring."""

    server: str | None = None
    """``http://host:port``, or several comma-separated (tried in turn); None: ``$NISSA_SERVER``; ``""``: none,
    whatever ``$NISSA_SERVER`` says (the run is only logged, ``nissa.upload`` sends it later). Once built: the
    server the run streams to, ``""`` for none (``stream_to``)."""
    run_name: str = "run"
    """What the server, the console and the web page call the run."""
    config: Mapping[str, Any] | None = None
    """The run's configuration (nested dicts are shown as ``a.b`` keys)."""
    log_dir: str | pathlib.Path = "nissa-runs"
    """Where run directories go: ``<log_dir>/<run_id>`` holds the run's log and stream secret."""
    run_id: str | None = None
    """Default ``<run_name>-<utc time>-<random hex>``; an existing run's id continues its log."""
    token: str | None = None
    """Bearer token of the server; None: ``$NISSA_TOKEN``."""
    level: str = TelemetryLevel.NORMAL
    """Telemetry level outside debug windows: ``OFF``, ``MINIMAL``, ``NORMAL`` or ``DEBUG`` (any case)."""
    steps_per_epoch: int = 1
    """An epoch (what a debug window counts) ends every that many ``run.step()``; 0: the loop calls
    ``run.epoch_end()``."""
    device: str = "cpu"
    """Where the loop's tensors live (``cpu``, ``cuda``, ``cuda:N``; ``auto``: CUDA if there is one); under
    torchrun a CUDA run's process group uses NCCL."""
    queue_size: int = HubConfig.queue_size
    """Events the hub holds for its thread before dropping metrics (never critical events)."""
    rank_timeout_s: float = 600.0
    """How long a collective between ranks may wait."""
    stack_watchdog_s: float = 0.0
    """> 0: write every thread's stack under the run directory whenever no Python thread could run that long."""
    project: str | None = None
    """The project the run belongs to (``GET /runs?q=project:cifar``; editable later, as the next three)."""
    group: str | None = None
    """Runs that go together: a sweep, the seeds of one experiment."""
    tags: Sequence[str] | None = None
    """Tags of the run."""
    notes: str | None = None
    """Free text about the run."""
    summary: Mapping[str, str] | None = None
    """How metrics are best, ``{"val_loss": "min", "val_acc": "max"}`` (see ``Run.define_metric``)."""
    system_metrics: bool = True
    """Sample the machine (CPU, memory, disk and network I/O, each visible GPU) as series under ``system.``."""
    system_metrics_s: float = SystemConfig.interval_s
    """Seconds between samples of the machine."""
    phases: Sequence[str] | None = None
    """The names of the loop's ``with run.phase(name)`` blocks a profile window of target ``update`` may record;
    a request for another is rejected with the reason. None: not said (such a window waits for its phase)."""
    heartbeat_s: float = HubConfig.heartbeat_s
    """A ``heartbeat`` event (with the step reached) this often: the server tells a hung rank from a silent one."""
    envs_per_rank: int = 0
    """For a loop that trains several environments per rank and labels events with ``env``: rank r's env ``i``
    is reported as ``r * envs_per_rank + i``, unique across the run (0: as given)."""
    stragglers: StragglerConfig = field(default_factory=StragglerConfig)
    """When a rank counts as slow under torchrun (default 1.5 times the others' median, 3 exchanges running)."""
    agree: bool = True
    """False: each rank applies a command at its own next step instead of one agreed step (only to measure what
    agreement costs; never for a real run)."""

    def __post_init__(self) -> None:
        check_init(run_name=self.run_name, config=self.config, steps_per_epoch=self.steps_per_epoch,
                   device=self.device, stack_watchdog_s=self.stack_watchdog_s, rank_timeout_s=self.rank_timeout_s,
                   phases=self.phases, envs_per_rank=self.envs_per_rank, stragglers=self.stragglers,
                   agree=self.agree)
        self.metadata  # noqa: B018 - checked now, kept (a cached property)
        if self.run_id is not None:
            checked_run_id(self.run_id, "nissa.init: run_id")
        if self.server is None:  # resolved once: a copy (dataclasses.replace) keeps what was chosen
            object.__setattr__(self, "server", env.server() or "")
            if self.server:
                check_server(self.server, "$NISSA_SERVER")
        elif self.server != "":
            check_server(self.server, "server")
        if self.token is None:
            object.__setattr__(self, "token", env.token() or None)
        try:
            object.__setattr__(self, "level", TelemetryLevel(str(self.level).upper()))
        except ValueError:
            raise ValueError(f"nissa.init: level must be one of {[lv.value for lv in TelemetryLevel]}, "
                             f"got {self.level!r}") from None
        if self.phases is not None:
            object.__setattr__(self, "phases", tuple(self.phases))
        self._check_stream()

    def _check_stream(self) -> None:
        try:
            check_interval(self.system_metrics_s)
        except ValueError as err:
            raise ValueError(f"nissa.init: system_metrics_s: {err}") from None
        if isinstance(self.queue_size, bool) or not isinstance(self.queue_size, int) or self.queue_size < 1:
            raise ValueError(f"nissa.init: queue_size must be an int >= 1, got {self.queue_size!r}")
        beat = self.heartbeat_s
        if isinstance(beat, bool) or not isinstance(beat, (int, float)) or not 0 < beat < float("inf"):
            raise ValueError(f"nissa.init: heartbeat_s must be seconds > 0, got {beat!r}")
        try:
            check_stream(server=self.stream_to, token=self.token, name=self.run_name)
        except ValueError as err:
            raise ValueError(f"nissa.init: {err}") from None

    @property
    def stream_to(self) -> str | None:
        """The server(s) the run streams to; None: the run is only logged."""
        return self.server or None

    @property
    def log_root(self) -> pathlib.Path:
        return pathlib.Path(self.log_dir)

    @functools.cached_property
    def metadata(self) -> RunMetadata:
        """Project, group, tags, notes and the metrics' directions, as ``run_started`` carries them (a run takes a
        copy: its directions grow with ``Run.define_metric``)."""
        return run_metadata(project=self.project, group=self.group, tags=self.tags, notes=self.notes,
                            summary=dict(self.summary) if isinstance(self.summary, Mapping) else self.summary)

    @property
    def telemetry_level(self) -> TelemetryLevel:
        return TelemetryLevel(self.level)

    def hub(self, run_id: str, rank: int) -> HubConfig:
        """The hub of ``rank`` in run ``run_id``."""
        return HubConfig(run_id=run_id, log_dir=self.log_root, server=self.stream_to, token=self.token, rank=rank,
                         name=self.run_name, queue_size=self.queue_size, heartbeat_s=self.heartbeat_s)

    def system(self, device: str) -> SystemConfig | None:
        """The machine's sampling for a rank on ``device`` (None: off)."""
        return SystemConfig(interval_s=float(self.system_metrics_s), device=device) if self.system_metrics else None
