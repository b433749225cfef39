"""Commands an operator sends to a live run, and their validated bounds."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, get_args

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


class _Escalation(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True, tag_field="action"):
    """What every body of ``POST /escalate`` holds; ``action`` (the tag) says which command it is."""

    run_id: RunId
    reason: Reason | None = None

    SCHEMA_RULES: ClassVar[dict[str, Any]] = {}
    """The cross-field rules of ``__post_init__`` in JSON Schema, for the command's OpenAPI component (what
    msgspec cannot say from the fields alone); a test holds the two to the same answer for every shape."""

    @property
    def action(self) -> CommandAction:
        return CommandAction(str(self.__struct_config__.tag))

    def describe(self) -> str:
        """The command in a few words, for the person who asked for it."""
        return self.action.value


class DebugRequest(_Escalation, tag=CommandAction.DEBUG.value):
    """Telemetry at DEBUG for ``epochs`` epochs, and/or (``through_update``) through the next PPO update."""

    epochs: DebugEpochs | None = None
    through_update: bool = False

    SCHEMA_RULES: ClassVar[dict[str, Any]] = {"anyOf": [
        {"title": "N epochs", "required": ["epochs"], "properties": {"epochs": {"type": "integer"}}},
        {"title": "Through the next PPO update", "required": ["through_update"],
         "properties": {"through_update": {"const": True}}},
    ]}

    def __post_init__(self) -> None:
        if self.epochs is None and not self.through_update:
            raise ValueError(f"action 'debug' needs 'epochs' (1..{MAX_DEBUG_EPOCHS}) or 'through_update'")

    def describe(self) -> str:
        return "debug window" + (" through the next PPO update" if self.through_update else "")


class ProfileRequest(_Escalation, tag=CommandAction.PROFILE.value):
    """A profiler window of ``batches`` batches, or (``"target": "update"``) over the next PPO update, or over
    the next run of a phase of the run's own (``phase``)."""

    batches: ProfileBatches | None = None
    target: ProfileTarget | None = None
    phase: CommandName | None = None
    """Target ``update``: the phase of the run's own to record (``with run.phase(name)``); None: the update
    (Esper's PPO update, or a loop's phase named ``update``)."""
    record_shapes: bool = False
    """Record operator input shapes (costs a little per operator)."""
    with_stack: bool = False
    """Record the Python stack of every operator (costs much more)."""
    profile_memory: bool = False
    """Record tensor allocations and frees (memory timeline)."""

    SCHEMA_RULES: ClassVar[dict[str, Any]] = {"anyOf": [
        {"title": "N batches", "required": ["batches"],
         "properties": {"batches": {"type": "integer"}, "target": {"enum": ["batches", None]},
                        "phase": {"type": "null"}}},
        {"title": "The next PPO update, or the next run of a phase", "required": ["target"],
         "properties": {"target": {"const": "update"}, "batches": {"type": "null"}}},
    ]}

    def __post_init__(self) -> None:
        if self.phase is not None and self.target != "update":
            raise ValueError("'phase' belongs to action 'profile' with target 'update'")
        if self.target == "update":
            if self.batches is not None:
                raise ValueError("a profile window of target 'update' records the next PPO update: "
                                 "it takes no 'batches'")
        elif self.batches is None:
            raise ValueError(f"action 'profile' needs 'batches' (1..{MAX_PROFILE_BATCHES}) or 'target': 'update'")

    def describe(self) -> str:
        if self.target != "update":
            return "profile window"
        return "profile window " + (f"over the next {self.phase!r} phase" if self.phase else "over the next update")


class CheckpointRequest(_Escalation, tag=CommandAction.CHECKPOINT.value):
    """A checkpoint at the next safe boundary."""


class StopRequest(_Escalation, tag=CommandAction.STOP.value):
    """A checkpoint at the next safe boundary, then the run ends ``stopped``."""


class StacksRequest(_Escalation, tag=CommandAction.STACKS.value):
    """Every thread's Python stack from every rank, answered at once by each rank's hub thread."""


class CallRequest(_Escalation, tag=CommandAction.CALL.value):
    """One of the run's own commands (the server checks ``name`` and ``args`` against the run's declaration)."""

    name: CommandName
    args: Annotated[dict[CommandName, CallValue], msgspec.Meta(max_length=MAX_ARGS)] = {}

    def describe(self) -> str:
        return f"call {self.name}"


EscalateRequest = DebugRequest | ProfileRequest | CheckpointRequest | StopRequest | StacksRequest | CallRequest
"""Body of ``POST /escalate``: one struct per action, chosen by its ``action`` field."""
ESCALATIONS: tuple[type[_Escalation], ...] = get_args(EscalateRequest)


def misplaced(body: object) -> str | None:
    """Why a body that names a known action failed, when it holds a field of another action's (``target`` in a
    debug request): which action takes it. None when that is not why."""
    if not isinstance(body, dict):
        return None
    own = next((tp for tp in ESCALATIONS if tp.__struct_config__.tag == body.get("action")), None)
    if own is None:
        return None
    for key in body:
        owners = [repr(tp.__struct_config__.tag) for tp in ESCALATIONS if key in tp.__struct_fields__]
        if key != "action" and key not in own.__struct_fields__ and owners:
            return f"{key!r} belongs to action {' or '.join(owners)}, not {body['action']!r}"
    return None


class _Addressed(msgspec.Struct, kw_only=True):
    """A command's id, run and action, and its action's fields as one flat struct (the request that made it was
    one of the ``EscalateRequest`` structs, checked; unset fields keep their defaults): what the run reads."""

    command_id: str
    run_id: str
    action: CommandAction
    epochs: int | None = None
    batches: int | None = None
    through_update: bool = False
    target: ProfileTarget | None = None
    """Profile windows: ``update`` records the next PPO update; None or ``batches``: ``batches`` batches."""
    reason: str | None = None
    record_shapes: bool = False
    with_stack: bool = False
    profile_memory: bool = False
    phase: str | None = None
    """Profile windows of target ``update``: the phase to record (None: the update)."""
    name: str | None = None
    """Action ``call``: the run's own command."""
    args: dict[str, CallValue] = {}


class Command(_Addressed, kw_only=True):
    """A command as delivered to the trainer."""

    created_at: float = 0.0


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


class CommandRecord(_Addressed, kw_only=True):
    """A command as ``GET /commands/{id}`` shows it. In a run of several ranks, ``ranks`` has each rank's
    status: the command is ``applied`` once a rank applied it, ``completed`` once every rank completed it,
    and ``failed`` (or ``rejected``) as soon as one rank did, its message naming the rank."""

    status: CommandStatus
    created_at: float
    updated_at: float
    applied_step: Step | None = None
    result: dict[str, Scalar] | None = None
    message: str = ""
    history: list[StatusChange] = []
    ranks: list[RankCommandStatus] = []
    """Each rank's status, in rank order (runs of several ranks only)."""
