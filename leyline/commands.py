"""Commands an operator sends to a live run, and their validated bounds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, TypeVar, get_args

import msgspec

from leyline import forms
from leyline.calls import MAX_ARGS, CallValue, CommandName
from leyline.enums import CommandAction, CommandStatus, ProfileTarget
from leyline.forms import SET, Form
from leyline.ids import ArtifactName, RunId
from leyline.payloads import Scalar, Step
from leyline.text import has_control, scrub

R = TypeVar("R", bound="Escalation")

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


def _said(description: str) -> msgspec.Meta:
    return msgspec.Meta(description=description)


class Escalation(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True, frozen=True,
                  tag_field="action"):
    """What every body of ``POST /escalate`` holds; ``action`` (the tag) says which command it is.

    ``FORMS`` are the ways to fill one (``leyline.forms``): checked here, and the component's rules in
    ``/openapi.json``. A request made in code is checked as a body is with ``checked``."""

    run_id: RunId
    reason: Annotated[Reason | None, _said("Why, in a few words: shown with the command and in the run's "
                                           "stream.")] = None

    FORMS: ClassVar[tuple[Form, ...]] = ()

    def __post_init__(self) -> None:
        forms.check(self, self.FORMS, f"action {self.action.value!r}")
        if self.reason is not None and has_control(self.reason):  # shown to every viewer, as a run's texts are
            msgspec.structs.force_setattr(self, "reason", scrub(self.reason))

    @property
    def action(self) -> CommandAction:
        return CommandAction(str(self.__struct_config__.tag))

    def describe(self) -> str:
        """The command in a few words, for the person who asked for it."""
        return self.action.value


class DebugRequest(Escalation, frozen=True, tag=CommandAction.DEBUG.value):
    """Telemetry at DEBUG for ``epochs`` epochs, and/or (``through_update``) through the next PPO update."""

    epochs: Annotated[DebugEpochs | None, _said("Epochs the DEBUG window lasts.")] = None
    through_update: Annotated[bool, _said("Keep the window open through the next PPO update.")] = False

    FORMS: ClassVar[tuple[Form, ...]] = (Form("N epochs", {"epochs": SET}),
                                         Form("Through the next PPO update", {"through_update": True}))

    def describe(self) -> str:
        return "debug window" + (" through the next PPO update" if self.through_update else "")


class ProfileRequest(Escalation, frozen=True, tag=CommandAction.PROFILE.value):
    """A profiler window of ``batches`` batches, or (``"target": "update"``) over the next PPO update, or over
    the next run of a phase of the run's own (``phase``)."""

    batches: Annotated[ProfileBatches | None, _said("Batches the profiler records.")] = None
    target: Annotated[ProfileTarget | None, _said("'update': record the next PPO update (or the next run of "
                                                  "'phase') instead of a number of batches.")] = None
    phase: Annotated[CommandName | None, _said("Target 'update': the phase of the run's own to record "
                                               "(with run.phase(name)); left out: the update.")] = None
    record_shapes: Annotated[bool, _said("Record operator input shapes (costs a little per operator).")] = False
    with_stack: Annotated[bool, _said("Record the Python stack of every operator (costs much more).")] = False
    profile_memory: Annotated[bool, _said("Record tensor allocations and frees (memory timeline).")] = False

    FORMS: ClassVar[tuple[Form, ...]] = (
        Form("N batches", {"batches": SET}, only={"target": (None, "batches"), "phase": (None,)}),
        Form("The next PPO update, or the next run of a phase", {"target": "update"}, only={"batches": (None,)}),
    )

    def describe(self) -> str:
        if self.target != "update":
            return "profile window"
        return "profile window " + (f"over the next {self.phase!r} phase" if self.phase else "over the next update")


class CheckpointRequest(Escalation, frozen=True, tag=CommandAction.CHECKPOINT.value):
    """A checkpoint at the next safe boundary."""

    share: bool = False
    """Upload the checkpoint's file as an artifact of the run, for another run to restore (a sweep's exploit):
    the result names the artifact."""


class StopRequest(Escalation, frozen=True, tag=CommandAction.STOP.value):
    """A checkpoint at the next safe boundary, then the run ends ``stopped``."""


class StacksRequest(Escalation, frozen=True, tag=CommandAction.STACKS.value):
    """Every thread's Python stack from every rank, answered at once by each rank's hub thread."""


class CallRequest(Escalation, frozen=True, tag=CommandAction.CALL.value):
    """One of the run's own commands (the server checks ``name`` and ``args`` against the run's declaration)."""

    name: Annotated[CommandName, _said("The command, as the run declared it (GET /runs/{run_id}: commands).")]
    args: Annotated[dict[CommandName, CallValue], msgspec.Meta(
        max_length=MAX_ARGS, description="Its arguments by name, as the run declared them.")] = {}

    def __post_init__(self) -> None:
        super().__post_init__()
        if any(isinstance(v, str) and has_control(v) for v in self.args.values()):  # shown as the reason is
            msgspec.structs.force_setattr(self, "args", {k: scrub(v) if isinstance(v, str) else v
                                                         for k, v in self.args.items()})

    def describe(self) -> str:
        return f"call {self.name}"


HparamName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$(?!\n)")]
HparamValue = Annotated[str, msgspec.Meta(max_length=256)] | int | float | bool
Hparams = Annotated[dict[HparamName, HparamValue], msgspec.Meta(max_length=64)]


class HparamsRequest(Escalation, frozen=True, tag=CommandAction.HPARAMS.value):
    """New values for the run's hyperparameters (its ``run.config``), handed to its ``on_hparams`` function at a
    step boundary; the result holds the values it took."""

    values: Annotated[dict[HparamName, HparamValue], msgspec.Meta(min_length=1, max_length=64)]

    def describe(self) -> str:
        return "hyperparameters " + ", ".join(sorted(self.values))


class RestoreRequest(Escalation, frozen=True, tag=CommandAction.RESTORE.value):
    """Load ``artifact``, a checkpoint that run ``source_run_id`` shared, through the run's ``on_restore``
    function at a step boundary, then take ``values`` as ``hparams`` would (a sweep's exploit)."""

    source_run_id: RunId
    artifact: ArtifactName
    values: Hparams = {}

    def describe(self) -> str:
        return f"restore from {self.source_run_id}"


EscalateRequest = (DebugRequest | ProfileRequest | CheckpointRequest | StopRequest | StacksRequest | CallRequest
                   | HparamsRequest | RestoreRequest)
"""Body of ``POST /escalate``: one struct per action, chosen by its ``action`` field."""
ESCALATIONS: tuple[type[Escalation], ...] = get_args(EscalateRequest)
_request_of = msgspec.json.Decoder(EscalateRequest)


REQUEST_TYPES: dict[str, type[Escalation]] = {str(tp.__struct_config__.tag): tp for tp in ESCALATIONS}
"""Each action's request struct, by the action's name."""


def checked(request: R) -> R:
    """``request`` as a body of it would decode: its fields' bounds checked too (a struct made in code checks only
    its forms); ``ValueError`` says what is wrong."""
    try:
        return _request_of.decode(msgspec.json.encode(request))  # type: ignore[return-value]
    except msgspec.ValidationError as err:
        raise ValueError(f"action {request.action.value!r}: {err}") from None


def from_flat(fields: Mapping[str, object]) -> EscalateRequest:
    """The request of a command in the flat form of protocol 1 (every action's fields beside each other, the
    others' at their defaults): its own action's fields taken; a ``ValidationError`` where they make none."""
    tp = REQUEST_TYPES.get(str(fields.get("action")))
    if tp is None:
        raise msgspec.ValidationError(f"no action of that name: {fields.get('action')!r:.80}")
    own = {k: v for k, v in fields.items() if (k in tp.__struct_fields__ or k == "action") and v is not None}
    return msgspec.convert(own, EscalateRequest)


def misplaced(body: object) -> str | None:
    """Why a body that names a known action failed, when it holds a field of another action's (``target`` in a
    debug request): which action takes it. None when that is not why."""
    if not isinstance(body, dict):
        return None
    own = REQUEST_TYPES.get(str(body.get("action")))
    if own is None:
        return None
    for key in body:
        owners = [repr(tp.__struct_config__.tag) for tp in ESCALATIONS if key in tp.__struct_fields__]
        if key != "action" and key not in own.__struct_fields__ and owners:
            return f"{key!r} belongs to action {' or '.join(owners)}, not {body['action']!r}"
    return None


class Command(msgspec.Struct, kw_only=True, frozen=True):
    """A command as delivered to the run: its id, the request (which names the run), and when it was made."""

    command_id: str
    request: EscalateRequest
    created_at: float = 0.0

    @property
    def run_id(self) -> str:
        return self.request.run_id

    @property
    def action(self) -> CommandAction:
        return self.request.action

    @property
    def reason(self) -> str | None:
        return self.request.reason


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
    """A command as ``GET /commands/{id}`` shows it: its id, run and action, the request that made it, and what
    became of it. In a run of several ranks, ``ranks`` has each rank's status: the command is ``applied`` once a
    rank applied it, ``completed`` once every rank completed it, and ``failed`` (or ``rejected``) as soon as one
    rank did, its message naming the rank."""

    command_id: str
    run_id: str
    action: CommandAction
    request: EscalateRequest | None = None
    """The request, as the server took it (or as the run reported one it gave itself); None only for a command a
    run gave itself that an earlier version recorded without it."""
    status: CommandStatus
    created_at: float
    updated_at: float
    applied_step: Step | None = None
    result: dict[str, Scalar] | None = None
    message: str = ""
    history: list[StatusChange] = []
    ranks: list[RankCommandStatus] = []
    """Each rank's status, in rank order (runs of several ranks only)."""
