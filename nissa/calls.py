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

from leyline import CommandAction
from leyline.calls import ArgSpec, CallValue, CommandSpec, check_call

from nissa.control.commands import CommandContext, CommandRejected

_TYPES: dict[Any, str] = {float: "float", int: "int", str: "str", bool: "bool"}


def spec_of(name: str, fn: Callable[..., Any], help: str | None = None) -> CommandSpec:
    """The declaration of ``fn`` as command ``name``; ``ValueError`` names what it cannot declare."""
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
        args.append(ArgSpec(name=param.name, type=kind, required=not optional,  # type: ignore[arg-type]
                            default=param.default if optional else None))
    doc = help if help is not None else (inspect.getdoc(fn) or "").split("\n")[0]
    return CommandSpec(name=name, help=doc[:500], args=args)


def as_result(value: object) -> dict[str, CallValue]:
    """What a handler returned, as a command's result: a dict of scalars as it is, a scalar as ``value``."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, (str, int, float, bool)) or v is None else repr(v) for k, v in value.items()}
    return {"value": value if isinstance(value, (str, int, float, bool)) else repr(value)}


class CallHandler:
    """The ``call`` action: dispatches to the run's declared functions."""

    action = CommandAction.CALL

    def __init__(self) -> None:
        self._functions: dict[str, Callable[..., Any]] = {}
        self.declared: list[CommandSpec] = []

    def declare(self, spec: CommandSpec, fn: Callable[..., Any]) -> None:
        if spec.name in self._functions:
            raise ValueError(f"command {spec.name!r} is declared already")
        self._functions[spec.name] = fn
        self.declared.append(spec)

    def apply(self, ctx: CommandContext) -> None:
        command = ctx.command
        try:
            args = check_call(self.declared, command.name or "", dict(command.args))
        except ValueError as err:
            raise CommandRejected(str(err)) from None
        ctx.complete(as_result(self._functions[command.name or ""](**args)))
