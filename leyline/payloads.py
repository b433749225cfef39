"""One typed payload per event kind. ``None`` in a measured field means "not measured", never 0.0."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import msgspec

from leyline.calls import Declared, Phases
from leyline.enums import EventKind, Kind
from leyline.summaries import Directions, Notes, Project, Tags

# Flat, JSON-safe values: what a config entry or a command result may hold.
Scalar = str | int | float | bool | None
MAX_INT = 2**63 - 1
"""The largest integer SQLite stores: a counter beyond it would fail every later write of its run."""
MAX_STEP = 2**53
"""The largest step a new event may have: a chart keeps steps as 64-bit floats, which hold every whole number up to
2⁵³ exactly (one past it would be charted, summarised and stored as another step)."""
STEP_RULE = "a whole number from 0 to 2^53 (9,007,199,254,740,992)"
"""The rule of a new event's step in words, for the messages that refuse one (short: a websocket close reason holds
123 bytes)."""
Step = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT, description=f"A step. A new event's is {STEP_RULE}, the "
                                                                 "largest a chart holds exactly; one stored before "
                                                                 "that rule may be larger.")]
"""A step as it reads (up to what SQLite stores: an event or a command stored before ``MAX_STEP`` still reads);
ingest and the client check a new one with ``is_step``."""


def is_step(value: object) -> bool:
    """Whether ``value`` may be a new event's step (``STEP_RULE``): an int (not a bool) from 0 to ``MAX_STEP``."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STEP


MAX_NAME_CHARS = 200
RunName = Annotated[str, msgspec.Meta(max_length=MAX_NAME_CHARS)]
"""A run's human name (``esper-train --run-name``): shown in every run list, so bounded."""

class Payload(msgspec.Struct, kw_only=True, frozen=True):
    """Base of every payload; ``KIND`` ties a payload type to its event kind."""

    KIND: ClassVar[Kind]


# --- run -------------------------------------------------------------------------------------


class ConfigUpdated(Payload, kw_only=True, frozen=True):
    """The run's config grew or changed after its start (``run.config.update(...)``, TensorBoard's
    ``add_hparams``): these entries over those ``run_started`` (and the updates before) carried."""

    KIND: ClassVar[Kind] = EventKind.CONFIG
    config: Annotated[dict[str, Scalar], msgspec.Meta(min_length=1, max_length=4096)]


class RunStarted(Payload, kw_only=True, frozen=True):
    """A run began: its name, full configuration and where it runs."""

    KIND: ClassVar[Kind] = EventKind.RUN_STARTED
    name: RunName
    config: dict[str, Scalar]
    host: str = ""
    pid: int = 0
    device: str = "cpu"
    torch_version: str = ""
    log_dir: str = ""
    world_size: int = 1
    """Ranks of the run (torchrun's WORLD_SIZE); each rank sends its own ``run_started``."""
    commands: Declared = []
    """Commands of the run's own it takes (``action`` ``call``); rank 0's declaration is the run's."""
    project: Project = ""
    """What the run belongs to (``cifar``); empty: none. Rank 0's project, group, tags and notes are the run's."""
    group: Project = ""
    """Runs that go together within it: a sweep, the seeds of one experiment."""
    tags: Tags = []
    notes: Notes = ""
    summary: Directions = {}
    """How each metric named here is best (``{"val_loss": "min"}``; see ``leyline.summaries``)."""
    phases: Phases | None = None
    """The phases a profile window of target ``update`` can record on this run (``phase``; ``update``: Esper's
    PPO update, or a loop's phase of that name); None: the run did not say, and such a window waits for its
    phase. A request for another is refused with the reason (``leyline.calls.unprofilable``)."""


class RunFinished(Payload, kw_only=True, frozen=True):
    """A run ended, cleanly or not: how, after how long, and why where it failed. What it achieved is in its
    summaries (``run.summary``). A ``run_finished`` stored before carried Esper's results too (``rounds``,
    ``fossilized`` …): decoding leaves those fields out."""

    KIND: ClassVar[Kind] = EventKind.RUN_FINISHED
    status: Literal["completed", "failed", "interrupted", "stopped"]
    """``stopped``: a ``stop`` command ended it after a checkpoint (``esper-train --resume`` continues it)."""
    duration_s: float
    error: str | None = None


class RunResumed(Payload, kw_only=True, frozen=True):
    """The run goes on from a checkpoint (``esper-train --resume``): the same run id and streams, each
    rank's ``seq`` continuing its log; the events after ``checkpoint_seq`` and before this one were of
    training the checkpoint does not hold, and are done again from its position."""

    KIND: ClassVar[Kind] = EventKind.RUN_RESUMED
    checkpoint: str
    """The checkpoint's name (its directory under the run's ``checkpoints/``)."""
    path: str
    """Where it was read from."""
    round: int
    """Rounds it holds: training goes on from round ``round + 1``."""
    checkpoint_step: Step
    checkpoint_epoch: int
    checkpoint_seq: int = 0
    """The last ``seq`` this rank had logged when the checkpoint was taken."""
    pid: int = 0
