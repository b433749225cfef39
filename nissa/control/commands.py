"""The command processor: applies commands at step boundaries and reports every status.

Commands come from the hub's inbox (delivered by the server) or are issued locally
(auto-escalation by the anomaly detector, ``--profile``); both take the same path. Each request
type (``leyline.DebugRequest``…) has one handler in a small registry, and the handler gets the
request typed (``ctx.request``), checked already: by the server's decoder, or by ``issue``. A
handler starts its command in ``apply`` (or refuses it by raising ``CommandRejected``) and finishes
it through its ``CommandContext`` then or later.
Status events: ``delivered`` (local commands; the hub reports the server's on receipt),
``applied`` with the step, then ``completed`` with a result, or ``failed`` / ``rejected``
with a reason. Handlers may also observe the run (``step_boundary``, ``epoch_end``,
``update_begin``, ``update_end``, ``run_end``): the processor forwards those to them.

Alone, a command applies at the next step boundary. In a run of several ranks (``agreed``) the
processor only holds what arrives; the run's ``Agreement`` takes the held commands to the next
exchange of the ranks, and every rank applies what they agreed on with ``apply_agreed``, at the
same step.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, cast

from leyline import ESCALATIONS, AnyPayload, Command, CommandStatus, CommandStatusChanged, EscalateRequest
from leyline.commands import Escalation, checked
from leyline.payloads import Scalar
from nissa.hub.ratelog import RateLimitedLog

logger = logging.getLogger(__name__)

Result = dict[str, Scalar]
_OBSERVED = ("step_boundary", "epoch_end", "update_begin", "update_end", "run_end")


class CommandRejected(Exception):
    """Raised by a handler's ``apply`` to refuse a command; the message is the reason."""


R = TypeVar("R", bound=Escalation)


class CommandHandler(Protocol[R]):
    """Starts one kind of command; may also define any of the observer methods above."""

    def apply(self, ctx: CommandContext[R]) -> None: ...


class Handles(Protocol):
    """What makes a handler the one for a request type: ``CommandProcessor.register``, ``Run.handle``."""

    def __call__(self, kind: type[R], handler: CommandHandler[R], /) -> None: ...


class CommandContext(Generic[R]):
    """One command being applied: its request, where it was applied, and how its handler finishes it."""

    def __init__(self, command: Command, step: int, epoch: int, report: Callable[..., None]) -> None:
        self.command = command
        self.step = step
        self.epoch = epoch
        self._report = report
        self._held: tuple[CommandStatus, Result | None, str] | None = None
        self._applying = True
        self.finished = False

    @property
    def command_id(self) -> str:
        return self.command.command_id

    @property
    def request(self) -> R:
        """The command's request, of the type its handler was registered for."""
        return cast(R, self.command.request)

    def complete(self, result: Result | None = None, message: str = "") -> None:
        self._finish(CommandStatus.COMPLETED, result, message)

    def fail(self, message: str, result: Result | None = None) -> None:
        self._finish(CommandStatus.FAILED, result, message)

    def _finish(self, status: CommandStatus, result: Result | None, message: str) -> None:
        if self.finished:
            return
        self.finished = True
        if self._applying:
            self._held = (status, result, message)  # reported right after ``applied``
        else:
            self._report(self.command, status, applied_step=self.step, result=result, message=message)

    def _applied(self) -> None:
        self._applying = False
        self._report(self.command, CommandStatus.APPLIED, applied_step=self.step)
        if self._held is not None:
            status, result, message = self._held
            self._report(self.command, status, applied_step=self.step, result=result, message=message)


class UnavailableHandler:
    """Answers every command of its action with ``rejected`` and a fixed reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def apply(self, ctx: CommandContext[Any]) -> None:
        raise CommandRejected(self.reason)


class CommandProcessor:
    """Dispatches commands to handlers at step boundaries; see the module docstring."""

    def __init__(self, emit: Callable[[AnyPayload], None], source: Callable[[], list[Command]], *,
                 agreed: bool = False) -> None:
        self._emit = emit
        self._source = source
        self.agreed = agreed
        """Commands wait for the ranks to agree on them (``take_held`` / ``apply_agreed``)."""
        self._held: list[Command] = []
        self._handlers: dict[type[Escalation], CommandHandler[Any]] = {}
        self._observers: dict[str, list[tuple[type[Escalation], Callable[..., None]]]] = {m: [] for m in _OBSERVED}
        self._local: deque[Command] = deque()
        self._seen: set[str] = set()
        self._active: dict[str, CommandContext] = {}
        self._ratelog = RateLimitedLog(logger)

    def register(self, kind: type[R], handler: CommandHandler[R]) -> None:
        """Make ``handler`` the one for requests of type ``kind`` (replacing any earlier one)."""
        if kind not in ESCALATIONS:
            raise TypeError(f"register takes a request type of leyline.EscalateRequest (DebugRequest…), got {kind!r}")
        self._handlers[kind] = handler
        for method, observers in self._observers.items():
            observers[:] = [(k, fn) for k, fn in observers if k is not kind]
            fn = getattr(handler, method, None)
            if callable(fn):
                observers.append((kind, fn))

    def handler(self, kind: type[R]) -> CommandHandler[R] | None:
        return self._handlers.get(kind)

    def submit(self, command: Command) -> None:
        """A locally generated command: reported delivered now (with its reason, which the server keeps
        as the command's), applied at the next step boundary."""
        self._local.append(command)
        self._report(command, CommandStatus.DELIVERED, message=command.reason or "", request=command.request)

    def issue(self, request: EscalateRequest, prefix: str = "auto") -> str:
        """Ask this run for ``request`` from inside it (auto-escalation, ``--profile``): checked as a body of it
        would be (``ValueError`` says why not), then submitted; returns the command id, ``{prefix}-…``."""
        command = Command(command_id=f"{prefix}-{uuid.uuid4().hex[:12]}", request=checked(request),
                          created_at=time.time())
        self.submit(command)
        return command.command_id

    @property
    def active(self) -> list[str]:
        """Ids of commands applied and not finished yet."""
        return [cid for cid, ctx in self._active.items() if not ctx.finished]

    # --- the run's hooks -------------------------------------------------------------------------

    def step_boundary(self, step: int, epoch: int) -> None:
        if not self.agreed:
            for command in self.take_held():
                self._apply(command, step, epoch)
        self._notify("step_boundary", step, epoch)
        self._prune()

    def take_held(self) -> list[Command]:
        """The commands received (or submitted here) and not applied yet, oldest first; handed over."""
        self._collect()
        held, self._held = self._held, []
        return held

    def apply_agreed(self, commands: list[Command], step: int, epoch: int) -> None:
        """Apply what the ranks agreed on, in order, at ``step`` (one already applied here is skipped)."""
        for command in commands:
            self._apply(command, step, epoch)
        self._prune()

    def epoch_end(self, epoch: int) -> None:
        self._notify("epoch_end", epoch)
        self._prune()

    def update_begin(self, round_: int) -> None:
        self._notify("update_begin", round_)

    def update_end(self, round_: int) -> None:
        self._notify("update_end", round_)
        self._prune()

    def run_end(self, reason: str, unapplied: list[Command] | None = None) -> None:
        """The run is over: handlers close what they hold; anything still open is failed, and so is every
        command the ranks never applied (``unapplied``: those of their last exchange, and any still held)."""
        self._notify("run_end", reason)
        for ctx in list(self._active.values()):
            ctx.fail(f"the run ended before the command finished ({reason})")
        self._active.clear()
        if self.agreed:  # in an exchange that was never applied, or held for one that will not come
            for command in [*(unapplied or []), *self.take_held()]:
                if command.command_id not in self._seen:
                    self._seen.add(command.command_id)
                    self._report(command, CommandStatus.FAILED, message=f"the run ended before the ranks "
                                                                        f"applied the command ({reason})")

    # --- internals -------------------------------------------------------------------------------

    def _collect(self) -> None:
        self._held.extend(c for c in self._source() if c.command_id not in self._seen)
        while self._local:
            self._held.append(self._local.popleft())

    def _apply(self, command: Command, step: int, epoch: int) -> None:
        if command.command_id in self._seen:
            return
        self._seen.add(command.command_id)
        handler = self._handlers.get(type(command.request))
        if handler is None:
            self._report(command, CommandStatus.REJECTED, message=f"no handler for action {command.action.value!r}")
            return
        ctx: CommandContext[Any] = CommandContext(command, step, epoch, self._report)
        try:
            handler.apply(ctx)
        except CommandRejected as err:
            self._report(command, CommandStatus.REJECTED, message=str(err))
            return
        except Exception as err:  # a handler is a plugin: its failure is the command's, never the run's
            logger.exception("command %s (%s) failed to apply", command.command_id, command.action.value)
            self._report(command, CommandStatus.FAILED, message=f"{type(err).__name__}: {err}")
            return
        self._active[command.command_id] = ctx
        ctx._applied()

    def _notify(self, method: str, *args: object) -> None:
        for kind, fn in self._observers[method]:
            try:
                fn(*args)
            except Exception as err:  # an observer's bug must not stop training; it is logged, rate-limited
                action = kind.__struct_config__.tag
                self._ratelog.log(logging.ERROR, f"{action}.{method}", "%s handler: %s failed: %r", action, method, err)

    def _prune(self) -> None:
        for cid in [cid for cid, ctx in self._active.items() if ctx.finished]:
            del self._active[cid]

    def _report(self, command: Command, status: CommandStatus, *, applied_step: int | None = None,
                result: Result | None = None, message: str = "", request: EscalateRequest | None = None) -> None:
        self._emit(CommandStatusChanged(command_id=command.command_id, action=command.action, status=status,
                                        applied_step=applied_step, result=result, message=message, request=request))
