"""``esper-train``'s own settings as data: the telemetry and ranks flags of a run and the upload command's, each a
frozen dataclass whose fields are the flags (``trainer.flags``), bounds checked on construction.

The ``$NISSA_*`` defaults are not read here: ``trainer.cli.environment()`` reads them, and the parsers get them
as their defaults (``add_train_args``, ``add_upload_args``).
"""

from __future__ import annotations

import argparse
import pathlib
from dataclasses import dataclass

from leyline import TelemetryLevel
from leyline.commands import MAX_PROFILE_BATCHES
from nissa import Settings, StragglerConfig
from nissa.parts import SystemConfig, check_servers, checked_run_id, run_metadata
from ranks import RanksConfig
from trainer import flags
from trainer.flags import FieldError


@dataclass(frozen=True)
class TelemetryFlags:
    """Where a run's events go, what the run is called and how much it measures."""

    server: str | None = None
    """nissa-server URL, e.g. http://127.0.0.1:8765, or several comma-separated (servers sharing one database,
    tried in turn when a connection fails), from $NISSA_SERVER when set; none: log only."""
    token: str | None = None
    """Bearer token, from $NISSA_TOKEN when set."""
    run_name: str = "esper"
    """Human name of the run."""
    run_id: str | None = None
    """Run id to use, from $NISSA_RUN_ID when set; none: <run-name>-<utc time>-<random>, chosen by rank 0 under
    torchrun (an existing run's id continues its log)."""
    log_dir: str = "./runs"
    """Where run logs go."""
    project: str = ""
    """The project the run belongs to (GET /runs?q=project:P)."""
    group: str = ""
    """Runs that go together: a sweep, the seeds of one experiment."""
    tags: tuple[str, ...] = ()
    """A tag of the run (repeat for several; editable later with PATCH /runs/{id})."""
    notes: str = ""
    """Free text about the run."""
    telemetry_level: TelemetryLevel = TelemetryLevel.NORMAL
    """Level outside debug windows, in upper or lower case. A debug window (a command, an anomaly) raises it
    for a while."""
    hub_queue: int = Settings.queue_size
    """Events held in memory before metrics drop."""
    profile: int | None = None
    """Open a torch.profiler window over the first BATCHES training batches."""
    profile_update: bool = False
    """Open a torch.profiler window over the first PPO update. With --profile too, it waits for the first."""
    close_timeout: float = 15.0
    """Seconds to deliver what is left when the run ends."""
    heartbeat: float = Settings.heartbeat_s
    """A heartbeat (with the step reached) this often: the server tells a hung rank, alive but not advancing,
    from a silent one by them."""
    stack_watchdog: float = 300.0
    """Write every thread's stack to RUN_DIR/stacks/ when no Python thread has run for SECONDS (the training
    thread stuck in native code holding the GIL); 0: off."""
    system_metrics: bool = True
    """Sample the machine (CPU, memory, disk and network I/O, GPUs) into series system.*."""
    system_metrics_interval: float = Settings.system_metrics_s
    """Seconds between samples of the machine."""
    verbose: bool = False
    """Log what the hub and the loop do to stderr (off: warnings only)."""

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "telemetry_level", TelemetryLevel(self.telemetry_level))
        except ValueError:
            raise FieldError("telemetry_level", f"must be one of {', '.join(TelemetryLevel)}, "
                                                f"got {self.telemetry_level!r}") from None
        if self.profile is not None and not 1 <= self.profile <= MAX_PROFILE_BATCHES:
            raise FieldError("profile", f"must be in 1..{MAX_PROFILE_BATCHES}, got {self.profile}")
        if self.hub_queue < 1:
            raise FieldError("hub_queue", f"must be >= 1, got {self.hub_queue}")
        if not self.close_timeout >= 0:
            raise FieldError("close_timeout", f"must be >= 0 seconds, got {self.close_timeout}")
        if not 0.1 <= self.heartbeat <= 3600:
            raise FieldError("heartbeat", f"must be in 0.1..3600 seconds, got {self.heartbeat}")
        flags.as_field_error("system_metrics_interval", lambda: SystemConfig(interval_s=self.system_metrics_interval))
        if not 0 <= self.stack_watchdog < float("inf"):
            raise FieldError("stack_watchdog", f"must be finite seconds >= 0 (0: off), got {self.stack_watchdog}")
        self._check_naming()

    def _check_naming(self) -> None:
        """The run's server, id and name, and where it belongs, as the contract takes them."""
        if self.server:
            flags.as_field_error("server", lambda: check_servers(str(self.server)))
        if self.run_id:
            flags.as_field_error("run_id", lambda: checked_run_id(str(self.run_id), "--run-id"))
        if not self.run_name.strip():
            raise FieldError("run_name", f"must not be empty, got {self.run_name!r}")
        for name, given in (("project", {"project": self.project}), ("group", {"group": self.group}),
                            ("tags", {"tags": list(self.tags)}), ("notes", {"notes": self.notes})):
            try:
                run_metadata("esper-train", **given)
            except ValueError as err:
                raise FieldError(name, str(err).removeprefix("esper-train: ")) from None


@dataclass(frozen=True)
class RanksFlags:
    """How the ranks of a run under torchrun wait for each other, and when one of them is slow."""

    rank_timeout: float = RanksConfig.timeout_s
    """How long the ranks wait for each other at an exchange before giving up."""
    straggler_factor: float = StragglerConfig.factor
    """A rank whose step time is over F times the other ranks' median is slow."""
    straggler_epochs: int = StragglerConfig.epochs
    """A slow rank is reported once slow N epochs running, and again only after N epochs under the midpoint of 1
    and F."""

    def __post_init__(self) -> None:
        flags.as_field_error("rank_timeout", lambda: RanksConfig(timeout_s=self.rank_timeout))
        flags.as_field_error("straggler_factor", lambda: StragglerConfig(factor=self.straggler_factor))
        flags.as_field_error("straggler_epochs", lambda: StragglerConfig(epochs=self.straggler_epochs))


@dataclass(frozen=True)
class UploadFlags:
    """``esper-train upload``: which run, to which server, and how long to try."""

    run_dir: pathlib.Path
    """The run's directory, LOG_DIR/<run_id>."""
    server: str | None = None
    """nissa-server URL (required), from $NISSA_SERVER when set."""
    token: str | None = None
    """Bearer token, from $NISSA_TOKEN when set."""
    wait: float = 0.0
    """Seconds to wait for a server that does not answer yet (0: fail at once)."""
    timeout: float = 120.0
    """Seconds to deliver the events before giving up."""

    def __post_init__(self) -> None:
        if not self.server:
            raise FieldError("server", "required (or set NISSA_SERVER)")
        flags.as_field_error("server", lambda: check_servers(str(self.server)))
        if not self.wait >= 0:
            raise FieldError("wait", f"must be >= 0 seconds, got {self.wait}")
        if not self.timeout > 0:
            raise FieldError("timeout", f"must be > 0 seconds, got {self.timeout}")


TELEMETRY_NAMES = {"tags": ["--tag"], "verbose": ["-v", "--verbose"]}
"""Fields whose flags are not spelled as their names."""


def add_train_args(parser: argparse.ArgumentParser, server: str | None, token: str | None,
                   run_id: str | None) -> None:
    """The "telemetry" and "ranks (under torchrun)" groups, the ``$NISSA_*`` values given as their defaults."""
    seconds = dict.fromkeys(("close_timeout", "heartbeat", "stack_watchdog", "system_metrics_interval"), "SECONDS")
    flags.add_fields(parser.add_argument_group("telemetry"), TelemetryFlags,
                     default=TelemetryFlags(server=server, token=token, run_id=run_id),
                     names=TELEMETRY_NAMES, repeat=["tags"],
                     fold_case=["telemetry_level"], secret=["token"],
                     metavars={"server": "URL", "tags": "TAG", "hub_queue": "EVENTS", "profile": "BATCHES", **seconds})
    flags.add_fields(parser.add_argument_group("ranks (under torchrun)"), RanksFlags,
                     metavars={"rank_timeout": "SECONDS", "straggler_factor": "F", "straggler_epochs": "N"})


def add_upload_args(parser: argparse.ArgumentParser, server: str | None, token: str | None) -> None:
    """The upload command's arguments, the ``$NISSA_*`` values given as their defaults."""
    flags.add_fields(parser, UploadFlags, default={"server": server, "token": token}, secret=["token"],
                     metavars={"server": "URL", "wait": "SECONDS", "timeout": "SECONDS"})


def check_telemetry_args(args: argparse.Namespace) -> tuple[TelemetryFlags, RanksFlags]:
    """The telemetry and ranks groups' settings; a ValueError names the flag (the training group checks its
    own)."""
    return (flags.build(TelemetryFlags, flags.values(args, TelemetryFlags), names=TELEMETRY_NAMES),
            flags.build(RanksFlags, flags.values(args, RanksFlags)))


def check_upload_args(args: argparse.Namespace) -> UploadFlags:
    """The upload command's settings; a ValueError names the flag."""
    return flags.build(UploadFlags, flags.values(args, UploadFlags))
