"""Configuration of esper-watch, validated on construction; the CLI and the tests build the same."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from leyline.codec import check_run_id
from leyline.commands import MAX_DEBUG_EPOCHS, MAX_PROFILE_BATCHES
from leyline.events import RUN_ID_RULE
from tui.client import ClientConfig
from tui.state_rows import Limits
from tui.views import StaleThresholds


@dataclass(frozen=True)
class WatchConfig:
    """Everything the app needs; ``client`` is None only when replaying a local run log."""

    client: ClientConfig | None
    """How to reach nissa-server."""
    run_id: str | None = None
    """Open this run directly instead of the run picker."""
    replay_file: Path | None = None
    """Replay a local run log (``events.jsonl``) without a server."""
    charts: bool = False
    """Open ``run_id`` (or the replay) straight on its charts."""
    compare: tuple[str, ...] = ()
    """Open these runs straight on their charts, overlaid."""
    refresh_hz: float = 4.0
    """How often panels re-render at most; events between two renders are coalesced."""
    limits: Limits = field(default_factory=Limits)
    """Bounds on what is kept per run."""
    stale: StaleThresholds = field(default_factory=StaleThresholds)
    """When a live run shows SLOW and STALE."""
    debug_epochs: int = 3
    """Length of the debug window ``d`` asks for."""
    profile_batches: int = 5
    """Default length of the profile window the ``p`` form offers."""
    command_poll_s: float = 1.0
    """How often a command this console issued is polled until it ends."""
    runs_poll_s: float = 2.0
    """How often the run picker refreshes, and a run view asks the server for its run's status."""
    run_wait_s: float = 30.0
    """How long a run opened by id may stay unknown to the server before the console says so; it goes
    on waiting (a trainer started a moment ago registers its run on its first connection)."""
    max_inflight_events: int = 20_000
    """Events received but not yet folded in before the stream stops reading (backpressure)."""
    max_replay_events: int = 200_000
    """Most events loaded for a replay."""

    def __post_init__(self) -> None:
        if self.client is None and self.replay_file is None:
            raise ValueError("need --server URL (or --replay FILE)")
        if self.charts and not (self.run_id or self.replay_file):
            raise ValueError("--charts needs --run RUN or --replay FILE")
        if self.compare and (len(set(self.compare)) < 2 or self.run_id or self.replay_file):
            raise ValueError("--compare needs two or more different runs, RUN_A,RUN_B, and no --run or --replay")
        for flag, run_id in [("--run", self.run_id)] + [("--compare", r) for r in self.compare]:
            if run_id is not None:
                _check_run_id(flag, run_id)
        if not 0.5 <= self.refresh_hz <= 60:
            raise ValueError(f"--refresh-hz must be in 0.5..60, got {self.refresh_hz:g}")
        if not 1 <= self.debug_epochs <= MAX_DEBUG_EPOCHS:
            raise ValueError(f"--debug-epochs must be in 1..{MAX_DEBUG_EPOCHS}")
        if not 1 <= self.profile_batches <= MAX_PROFILE_BATCHES:
            raise ValueError(f"--profile-batches must be in 1..{MAX_PROFILE_BATCHES}")
        if self.command_poll_s <= 0 or self.runs_poll_s <= 0 or self.run_wait_s <= 0:
            raise ValueError("poll intervals and run_wait_s must be > 0")
        if self.max_inflight_events < 1 or self.max_replay_events < 1:
            raise ValueError("event bounds must be >= 1")

    @property
    def refresh_s(self) -> float:
        return 1.0 / self.refresh_hz


def _check_run_id(flag: str, run_id: str) -> None:
    try:
        check_run_id(run_id)
    except msgspec.ValidationError:
        raise ValueError(f"{flag}: {run_id!r} is not a run id ({RUN_ID_RULE}; esper-train prints it when it "
                         f"starts)") from None
