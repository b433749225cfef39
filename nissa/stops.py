"""``checkpoint`` and ``stop`` for any loop: the run's own functions (``run.on_checkpoint``, ``run.on_stop``)
called at a step boundary, on the training thread, their return value the command's result.

Without an ``on_checkpoint`` function a ``checkpoint`` command is rejected with the reason. ``stop`` calls
the ``on_stop`` function (if any) and sets ``run.should_stop``: the loop ends at its own pace and
``run.finish()`` reports the run ``stopped``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leyline import CheckpointRequest, StopRequest
from nissa.calls import as_result
from nissa.control.commands import CommandContext, CommandRejected

Hook = Callable[[int], Any]
"""Called with the step it runs at."""


Share = Callable[[CommandContext[CheckpointRequest], Any], None]
"""Uploads the file a checkpoint saved for other runs to restore, then finishes the command."""


class CheckpointHandler:

    def __init__(self, share: Share | None = None) -> None:
        self.fn: Hook | None = None
        self._share = share

    def apply(self, ctx: CommandContext[CheckpointRequest]) -> None:
        if self.fn is None:
            raise CommandRejected("this run takes no checkpoints (it set no run.on_checkpoint function)")
        share = ctx.request.share
        if share and self._share is None:
            raise CommandRejected("this run cannot share its checkpoints")
        returned = self.fn(ctx.step)
        if share and self._share is not None:
            self._share(ctx, returned)
        else:
            ctx.complete(as_result(returned))


class StopHandler:

    def __init__(self) -> None:
        self.fn: Hook | None = None
        self.asked: str | None = None
        """The ``stop`` command that stops the run, once one was applied."""

    def apply(self, ctx: CommandContext[StopRequest]) -> None:
        if self.asked is not None:
            raise CommandRejected(f"the run is already stopping ({self.asked})")
        self.asked = ctx.command_id
        ctx.complete(as_result(self.fn(ctx.step)) if self.fn is not None else {"step": ctx.step})
