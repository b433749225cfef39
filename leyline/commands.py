"""Commands an operator sends to a live run, and their validated bounds."""

from __future__ import annotations

from typing import Annotated

import msgspec

from leyline.calls import MAX_ARGS, CallValue, CommandName
from leyline.enums import CommandAction, CommandStatus, ProfileTarget
from leyline.events import RunId
from leyline.payloads import Scalar, Step

MAX_DEBUG_EPOCHS = 1000
MAX_PROFILE_BATCHES = 500
MAX_REASON_CHARS = 500

# Commands a trainer gives itself (``--profile``, auto-escalation) carry ids with these prefixes; the
# server's own ids are hex and never do. The server records them from their status events.
TRAINER_COMMAND_PREFIXES = ("local-", "auto-")


def is_trainer_command(command_id: str) -> bool:
    """The trainer issued this command itself; no ``POST /escalate`` created it."""
    return command_id.startswith(TRAINER_COMMAND_PREFIXES)


DebugEpochs = Annotated[int, msgspec.Meta(ge=1, le=MAX_DEBUG_EPOCHS)]
ProfileBatches = Annotated[int, msgspec.Meta(ge=1, le=MAX_PROFILE_BATCHES)]
Reason = Annotated[str, msgspec.Meta(max_length=MAX_REASON_CHARS)]


class EscalateRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Body of ``POST /escalate``: a debug window of ``epochs`` (and/or through the next PPO update),
    or a profile window of ``batches``, or (``"target": "update"``) over the next PPO update; or
    ``checkpoint`` (one at the next safe boundary) or ``stop`` (checkpoint, then end the run ``stopped``); or
    ``stacks`` (every thread's Python stack from every rank, answered at once by each rank's hub thread)."""

    run_id: RunId
    action: CommandAction
    epochs: DebugEpochs | None = None
    batches: ProfileBatches | None = None
    through_update: bool = False
    target: ProfileTarget | None = None
    reason: Reason | None = None
    record_shapes: bool = False
    """Profile windows: record operator input shapes (costs a little per operator)."""
    with_stack: bool = False
    """Profile windows: record the Python stack of every operator (costs much more)."""
    profile_memory: bool = False
    """Profile windows: record tensor allocations and frees (memory timeline)."""

    phase: CommandName | None = None
    """Action ``profile``, target ``update``: the phase of the run's own to record (``with run.phase(name)``);
    None: the update (Esper's PPO update, or a loop's phase named ``update``)."""
    name: CommandName | None = None
    """Action ``call``: which of the run's own commands (the server checks it against the run's declaration)."""
    args: Annotated[dict[CommandName, CallValue], msgspec.Meta(max_length=MAX_ARGS)] = {}
    """Action ``call``: its arguments by name."""

    def __post_init__(self) -> None:
        if (self.action is CommandAction.CALL) != (self.name is not None):
            raise ValueError("action 'call' needs 'name' (a command the run declared); other actions take no 'name'")
        if self.phase is not None and self.target != "update":
            raise ValueError("'phase' belongs to action 'profile' with target 'update'")
        if self.args and self.action is not CommandAction.CALL:
            raise ValueError("'args' belong to action 'call'")
        if self.action is CommandAction.CALL:
            if (self.epochs is not None or self.batches is not None or self.through_update or self.target is not None
                    or self.record_shapes or self.with_stack or self.profile_memory):
                raise ValueError("action 'call' takes 'name' and 'args' (and 'reason') only")
            return
        if self.action is not CommandAction.PROFILE and (self.record_shapes or self.with_stack
                                                          or self.profile_memory):
            raise ValueError("'record_shapes', 'with_stack' and 'profile_memory' belong to action 'profile'")
        if self.action in (CommandAction.CHECKPOINT, CommandAction.STOP, CommandAction.STACKS):
            if self.epochs is not None or self.batches is not None or self.through_update or self.target is not None:
                raise ValueError(f"action {self.action.value!r} takes no 'epochs', 'batches', 'through_update' "
                                 "or 'target' (only 'reason')")
        elif self.action is CommandAction.DEBUG:
            if self.batches is not None or self.target is not None:
                raise ValueError("'batches' and 'target' belong to action 'profile', not 'debug'")
            if self.epochs is None and not self.through_update:
                raise ValueError("action 'debug' needs 'epochs' (1..%d) or 'through_update'" % MAX_DEBUG_EPOCHS)
        else:
            if self.epochs is not None or self.through_update:
                raise ValueError("action 'profile' takes 'batches' or 'target', not 'epochs' or 'through_update'")
            if self.target == "update":
                if self.batches is not None:
                    raise ValueError("a profile window of target 'update' records the next PPO update: "
                                     "it takes no 'batches'")
            elif self.batches is None:
                raise ValueError("action 'profile' needs 'batches' (1..%d) or 'target': 'update'"
                                 % MAX_PROFILE_BATCHES)


class Command(msgspec.Struct, kw_only=True):
    """A command as delivered to the trainer."""

    command_id: str
    run_id: str
    action: CommandAction
    epochs: int | None = None
    batches: int | None = None
    through_update: bool = False
    target: ProfileTarget | None = None
    """Profile windows: ``update`` records the next PPO update; None or ``batches``: ``batches`` batches."""
    reason: str | None = None
    created_at: float = 0.0
    record_shapes: bool = False
    with_stack: bool = False
    profile_memory: bool = False
    phase: str | None = None
    """Profile windows of target ``update``: the phase to record (None: the update)."""
    name: str | None = None
    """Action ``call``: the run's own command to run."""
    args: dict[str, CallValue] = {}


class StatusChange(msgspec.Struct, kw_only=True):
    """One step of a command's history."""

    status: CommandStatus
    ts: float
    step: Step | None = None
    message: str = ""


class RankCommandStatus(msgspec.Struct, kw_only=True):
    """Where one rank of a run of several is with a command."""

    rank: int
    status: CommandStatus
    applied_step: Step | None = None
    result: dict[str, Scalar] | None = None
    message: str = ""


class CommandRecord(msgspec.Struct, kw_only=True):
    """A command as ``GET /commands/{id}`` shows it. In a run of several ranks, ``ranks`` has each rank's
    status: the command is ``applied`` once a rank applied it, ``completed`` once every rank completed it,
    and ``failed`` (or ``rejected``) as soon as one rank did, its message naming the rank."""

    command_id: str
    run_id: str
    action: CommandAction
    status: CommandStatus
    created_at: float
    updated_at: float
    epochs: int | None = None
    batches: int | None = None
    through_update: bool = False
    target: ProfileTarget | None = None
    reason: str | None = None
    record_shapes: bool = False
    with_stack: bool = False
    profile_memory: bool = False
    applied_step: Step | None = None
    result: dict[str, Scalar] | None = None
    message: str = ""
    history: list[StatusChange] = []
    ranks: list[RankCommandStatus] = []
    phase: str | None = None
    name: str | None = None
    """Action ``call``: the run's own command called."""
    args: dict[str, CallValue] = {}
    """Each rank's status, in rank order (runs of several ranks only)."""
