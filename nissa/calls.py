"""A run's own commands: ``@run.command("set_lr")`` declares one from a function's signature, and the ``call``
handler runs it at a step boundary with the arguments the server checked, completing the command with what
the function returned.

Arguments are typed by their annotations (``float``, ``int``, ``str``, ``bool``); one with a default is
optional. The declaration travels in the run's ``run_started`` event, so it is made before the run's first
step (``Run.start``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

import msgspec

from leyline import CallRequest
from leyline.calls import MAX_DECLARED, ArgSpec, ArgType, CallValue, CommandName, CommandSpec, check_call
from nissa.control.commands import CommandContext, CommandRejected

_TYPES: dict[Any, ArgType] = {float: "float", int: "int", str: "str", bool: "bool"}


def spec_of(name: str, fn: Callable[..., Any], help: str | None = None) -> CommandSpec:
    """The declaration of ``fn`` as command ``name``; ``ValueError`` names what it cannot declare."""
    try:
        msgspec.convert(name, CommandName)
    except msgspec.ValidationError:
        raise ValueError(f"command name {name!r}: 1-64 characters, a lowercase letter first, then lowercase "
                         f"letters, digits and _") from None
    if not callable(fn):
        raise TypeError(f"command {name!r}: expected a function to declare, got {type(fn).__name__}")
    hints = get_type_hints(fn)
    args = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise ValueError(f"command {name!r}: parameter {param.name!r} must be a named one (no *args, **kwargs)")
        kind = _TYPES.get(hints.get(param.name))
        if kind is None:
            raise ValueError(f"command {name!r}: parameter {param.name!r} needs an annotation of float, int, str "
                             f"or bool")
        optional = param.default is not param.empty
        args.append(ArgSpec(name=param.name, type=kind, required=not optional,
                            default=param.default if optional else None))
    doc = help if help is not None else (inspect.getdoc(fn) or "").split("\n")[0]
    spec = CommandSpec(name=name, help=str(doc)[:500], args=args)
    try:  # what run_started will carry, checked now: the hub would refuse the whole event later
        return msgspec.convert(msgspec.to_builtins(spec), CommandSpec)
    except msgspec.ValidationError as err:
        raise ValueError(f"command {name!r}: {err}") from None


def as_result(value: object) -> dict[str, CallValue]:
    """What a handler returned, as a command's result: a dict of scalars as it is, a scalar as ``value``."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, (str, int, float, bool)) or v is None else repr(v) for k, v in value.items()}
    return {"value": value if isinstance(value, (str, int, float, bool)) else repr(value)}


class CallHandler:
    """The ``call`` action: dispatches to the run's declared functions."""


    def __init__(self) -> None:
        self._functions: dict[str, Callable[..., Any]] = {}
        self.declared: list[CommandSpec] = []

    def declare(self, spec: CommandSpec, fn: Callable[..., Any]) -> None:
        if spec.name in self._functions:
            raise ValueError(f"command {spec.name!r} is declared already")
        if len(self.declared) >= MAX_DECLARED:
            raise ValueError(f"command {spec.name!r}: a run declares at most {MAX_DECLARED} commands")
        self._functions[spec.name] = fn
        self.declared.append(spec)

    def apply(self, ctx: CommandContext[CallRequest]) -> None:
        request = ctx.request
        try:  # the run's own declaration binds the call (defaults filled in), whatever the server saw
            args = check_call(self.declared, request.name, dict(request.args))
        except ValueError as err:
            raise CommandRejected(str(err)) from None
        ctx.complete(as_result(self._functions[request.name](**args)))
