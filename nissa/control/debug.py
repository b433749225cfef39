"""The ``debug`` action: a DEBUG telemetry window through the level controller."""

from __future__ import annotations

from leyline import DebugRequest
from nissa.control.commands import CommandContext
from nissa.control.levels import LevelController

PROFILE_UNAVAILABLE = "profiling not available"


class DebugHandler:
    """Opens (or extends) a DEBUG window per command; completes each when its own part is done."""


    def __init__(self, levels: LevelController) -> None:
        self.levels = levels

    def apply(self, ctx: CommandContext[DebugRequest]) -> None:
        request = ctx.request
        reason = f"command: {request.reason}" if request.reason else "command"
        self.levels.open_window(ctx.command_id, step=ctx.step, epoch=ctx.epoch, epochs=request.epochs,
                                through_update=request.through_update, done=ctx.complete, reason=reason)

    def step_boundary(self, step: int, epoch: int) -> None:
        self.levels.step(step)

    def epoch_end(self, epoch: int) -> None:
        self.levels.epoch_end(epoch)

    def update_begin(self, round_: int) -> None:
        self.levels.update_begin()

    def update_end(self, round_: int) -> None:
        self.levels.update_end()

    def run_end(self, reason: str) -> None:
        self.levels.close_all(f"run ended ({reason})")
