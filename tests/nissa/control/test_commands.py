"""The command processor: statuses in order, the handler registry, local submissions."""

from __future__ import annotations

from collections import deque

import msgspec
import pytest

from leyline import (
    Command,
    CommandAction,
    CommandStatus,
    CommandStatusChanged,
    DebugRequest,
    ProfileRequest,
    TelemetryLevel,
    decode_frame,
)
from leyline.commands import MAX_DEBUG_EPOCHS, REQUEST_TYPES
from nissa.control import (
    PROFILE_UNAVAILABLE,
    CommandContext,
    CommandProcessor,
    CommandRejected,
    DebugHandler,
    LevelController,
    UnavailableHandler,
)


class Harness:
    def __init__(self) -> None:
        self.emitted: list = []
        self.inbox: deque[Command] = deque()
        self.levels = LevelController(TelemetryLevel.NORMAL, self.emitted.append)
        self.proc = CommandProcessor(self.emitted.append, self._drain)
        self.proc.register(DebugRequest, DebugHandler(self.levels))
        self.proc.register(ProfileRequest, UnavailableHandler(PROFILE_UNAVAILABLE))

    def _drain(self) -> list[Command]:
        out = list(self.inbox)
        self.inbox.clear()
        return out

    def statuses(self, command_id: str) -> list[tuple[CommandStatus, int | None]]:
        return [(p.status, p.applied_step) for p in self.emitted
                if isinstance(p, CommandStatusChanged) and p.command_id == command_id]

    def status_event(self, command_id: str, status: CommandStatus) -> CommandStatusChanged:
        return next(p for p in self.emitted if isinstance(p, CommandStatusChanged)
                    and p.command_id == command_id and p.status is status)


def _cmd(cid: str, action=CommandAction.DEBUG, **kw) -> Command:
    return Command(command_id=cid, request=REQUEST_TYPES[action](run_id="r", **kw))


def test_debug_command_is_applied_at_the_step_and_completes_when_its_window_closes():
    h = Harness()
    h.inbox.append(_cmd("c1", epochs=1))
    h.proc.step_boundary(12, 2)
    assert h.statuses("c1") == [(CommandStatus.APPLIED, 12)]
    assert h.levels.level is TelemetryLevel.DEBUG
    h.proc.step_boundary(13, 2)
    h.proc.epoch_end(2)
    assert h.statuses("c1")[-1] == (CommandStatus.COMPLETED, 12)
    assert h.status_event("c1", CommandStatus.COMPLETED).result["closed_epoch"] == 2
    assert h.levels.level is TelemetryLevel.NORMAL and h.proc.active == []


def test_profile_is_rejected_until_a_handler_is_plugged_in():
    h = Harness()
    h.inbox.append(_cmd("p1", action=CommandAction.PROFILE, batches=3))
    h.proc.step_boundary(1, 1)
    assert h.statuses("p1") == [(CommandStatus.REJECTED, None)]
    assert h.status_event("p1", CommandStatus.REJECTED).message == PROFILE_UNAVAILABLE


class CountingProfile:
    """A handler that finishes after its batches and observes step boundaries."""

    def __init__(self) -> None:
        self.ctx: CommandContext | None = None
        self.left = 0

    def apply(self, ctx: CommandContext) -> None:
        if self.ctx is not None and not self.ctx.finished:
            raise CommandRejected("a profile window is already open")
        self.ctx, self.left = ctx, ctx.request.batches

    def step_boundary(self, step: int, epoch: int) -> None:
        if self.ctx is not None and not self.ctx.finished and step > self.ctx.step:
            self.left -= 1
            if self.left == 0:
                self.ctx.complete({"batches": self.ctx.request.batches, "last_step": step})


def test_a_plugged_in_handler_observes_steps_and_a_second_request_is_rejected():
    h = Harness()
    h.proc.register(ProfileRequest, CountingProfile())
    h.inbox.extend([_cmd("p1", action=CommandAction.PROFILE, batches=2),
                    _cmd("p2", action=CommandAction.PROFILE, batches=1)])
    for step in (5, 6, 7):
        h.proc.step_boundary(step, 1)
    assert h.statuses("p1") == [(CommandStatus.APPLIED, 5), (CommandStatus.COMPLETED, 5)]
    assert h.status_event("p1", CommandStatus.COMPLETED).result == {"batches": 2, "last_step": 7}
    assert h.statuses("p2") == [(CommandStatus.REJECTED, None)]


class Immediate:
    def apply(self, ctx: CommandContext) -> None:
        ctx.complete({"ok": True})


class Broken:
    def apply(self, ctx: CommandContext) -> None:
        raise RuntimeError("boom")

    def epoch_end(self, epoch: int) -> None:
        raise RuntimeError("observer boom")


def test_applied_always_precedes_completion_and_handler_errors_fail_the_command_not_the_run():
    h = Harness()
    h.proc.register(ProfileRequest, Immediate())
    h.inbox.append(_cmd("i", action=CommandAction.PROFILE, batches=1))
    h.proc.step_boundary(3, 1)
    assert [s for s, _ in h.statuses("i")] == [CommandStatus.APPLIED, CommandStatus.COMPLETED]
    h.proc.register(ProfileRequest, Broken())
    h.inbox.append(_cmd("b", action=CommandAction.PROFILE, batches=1))
    h.proc.step_boundary(4, 1)
    h.proc.epoch_end(1)  # the broken observer is logged, not raised
    assert h.statuses("b") == [(CommandStatus.FAILED, None)]
    assert "boom" in h.status_event("b", CommandStatus.FAILED).message


def test_duplicates_are_ignored_and_local_commands_take_the_same_path():
    h = Harness()
    h.inbox.extend([_cmd("c", epochs=1), _cmd("c", epochs=1)])
    h.proc.step_boundary(1, 1)
    h.inbox.append(_cmd("c", epochs=1))
    h.proc.step_boundary(2, 1)
    assert h.statuses("c") == [(CommandStatus.APPLIED, 1)]
    cid = h.proc.issue(DebugRequest(run_id="r", epochs=2, reason="anomaly: kl_spike"))
    assert cid.startswith("auto-") and h.statuses(cid) == [(CommandStatus.DELIVERED, None)]
    h.proc.step_boundary(3, 1)
    assert h.statuses(cid)[-1] == (CommandStatus.APPLIED, 3)


def test_run_end_fails_what_is_still_open_and_reverts_the_level():
    h = Harness()
    h.inbox.append(_cmd("long", epochs=50))
    h.proc.step_boundary(1, 1)
    h.proc.run_end("completed")
    assert h.statuses("long")[-1][0] is CommandStatus.FAILED
    assert "run ended" in h.status_event("long", CommandStatus.FAILED).message
    assert h.levels.level is TelemetryLevel.NORMAL


@pytest.mark.parametrize("fields", [{}, {"epochs": 0}, {"epochs": MAX_DEBUG_EPOCHS + 1}, {"through_update": False}])
def test_a_malformed_debug_request_never_reaches_a_handler(fields):
    """The request is checked where it is made: a frame that holds one does not decode, a run that issues one
    itself (auto-escalation) is told why at once, and nothing is left for the handler to check again."""
    frame = msgspec.json.encode({"type": "command", "command": {
        "command_id": "x", "request": {"action": "debug", "run_id": "r", **fields}}})
    with pytest.raises(msgspec.ValidationError):
        decode_frame(frame)
    h = Harness()
    with pytest.raises(ValueError, match="epochs"):
        h.proc.issue(DebugRequest(run_id="r", **fields))  # a bound: checked by ``issue``; a form: when made
    h.proc.step_boundary(1, 1)
    assert h.emitted == []
