"""Commands of a run's own (``@run.command("set_lr")`` in the client): declared when the run starts, in its
``run_started`` event, and called with ``POST /escalate {"action": "call", "name": …, "args": {…}}``. The
run's phases (what a profile window of target ``update`` can record) are declared there too (``Phases``).

The server checks a call against the declaration (``check_call``) before queueing it: a name the run did not
declare, an argument it does not take, a missing one or one of the wrong type is refused with a 422 and the
reason. The run checks again when it applies the call, at a step boundary.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from leyline.enums import CommandAction

CallValue = str | int | float | bool | None
"""What an argument may hold (flat, JSON-safe)."""
MAX_ARGS = 16
MAX_DECLARED = 64
MAX_HELP_CHARS = 500
MAX_STR_ARG_CHARS = 1000

CommandName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$(?!\n)")]
"""``set_lr``, ``dump_batch``: lower case, digits and ``_``, a letter first."""
ArgType = Literal["float", "int", "str", "bool"]
Help = Annotated[str, msgspec.Meta(max_length=MAX_HELP_CHARS)]
RESERVED = frozenset(action.value for action in CommandAction)
"""Names of the built-in actions: no command of a run's own takes one."""


class ArgSpec(msgspec.Struct, kw_only=True, frozen=True):
    """One argument of a declared command."""

    name: CommandName
    type: ArgType
    help: Help = ""
    required: bool = True
    default: CallValue = None
    """What the handler gets when a call leaves the argument out (``required`` False only)."""


class CommandSpec(msgspec.Struct, kw_only=True, frozen=True):
    """A command a run declared: its name, its typed arguments, and a line of help for the console."""

    name: CommandName
    help: Help = ""
    args: Annotated[list[ArgSpec], msgspec.Meta(max_length=MAX_ARGS)] = []

    def __post_init__(self) -> None:
        if self.name in RESERVED:
            raise ValueError(f"command name {self.name!r} is a built-in action's")
        names = [a.name for a in self.args]
        if len(set(names)) != len(names):
            raise ValueError(f"command {self.name!r} declares an argument twice")


Declared = Annotated[list[CommandSpec], msgspec.Meta(max_length=MAX_DECLARED)]
Phases = Annotated[list[CommandName], msgspec.Meta(max_length=MAX_DECLARED)]
"""The phases of a run a profile window of target ``update`` can record (``run_started.phases``)."""
UPDATE_PHASE = "update"
"""The phase a profile window of target ``update`` records when it names none: Esper's PPO update."""


def unprofilable(phases: list[str] | tuple[str, ...] | None, phase: str | None) -> str | None:
    """Why a profile window of target ``update`` over ``phase`` (None: the update) could never record on a run
    that declared ``phases`` (None: it did not say: the window waits for its phase); None when it could."""
    wanted = phase or UPDATE_PHASE
    if phases is None or wanted in phases:
        return None
    has = ", ".join(phases) if phases else "none"
    return (f"this run has no phase {wanted!r} (its phases: {has}): a profile window of target 'update' would "
            f"never record; profile 'batches' instead")


_WHAT = {"float": "a finite float", "int": "an int of 64 bits", "bool": "a bool",
         "str": f"a str of at most {MAX_STR_ARG_CHARS} characters"}


def _fits(kind: ArgType, value: CallValue) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "int":  # 64 bits, as every integer of the contract: what any client's language can hold
        return isinstance(value, int) and -(2**63) <= value < 2**63
    if kind == "float":
        return isinstance(value, (int, float)) and value == value and abs(value) != float("inf")
    return isinstance(value, str) and len(value) <= MAX_STR_ARG_CHARS


def check_call(declared: list[CommandSpec], name: str, args: dict[str, CallValue]) -> dict[str, CallValue]:
    """The arguments a handler gets (defaults filled in); ``ValueError`` says what is wrong with the call."""
    spec = next((s for s in declared if s.name == name), None)
    if spec is None:
        offered = ", ".join(s.name for s in declared) or "none"
        raise ValueError(f"the run declared no command {name!r} (it declared: {offered})")
    known = {a.name: a for a in spec.args}
    extra = sorted(set(args) - set(known))
    if extra:
        raise ValueError(f"command {name!r} takes no argument {extra[0]!r} (it takes: {', '.join(known) or 'none'})")
    out: dict[str, CallValue] = {}
    for arg in spec.args:
        if arg.name not in args:
            if arg.required:
                raise ValueError(f"command {name!r} needs argument {arg.name!r} ({arg.type})")
            out[arg.name] = arg.default
            continue
        value = args[arg.name]
        if not _fits(arg.type, value):
            raise ValueError(f"command {name!r}: argument {arg.name!r} must be {_WHAT[arg.type]}, got {value!r:.200}")
        out[arg.name] = float(value) if arg.type == "float" and isinstance(value, int | float) else value
    return out
