"""``NullCheckpointer``: a run that takes no checkpoints runs the same loop (no ``if checkpoints`` in it).

``checkpoint`` and ``stop`` are then rejected, with the reason (``NullCheckpointer.register``).
"""

from __future__ import annotations

from typing import Any

from leyline import CheckpointRequest, StopRequest
from nissa.parts import CommandContext, CommandRejected, Handles
from trainer.checkpoint.files import Written

UNAVAILABLE = "this run takes no checkpoints: it has none to take, and none to stop at"


class _Refused:
    def apply(self, ctx: CommandContext[Any]) -> None:
        raise CommandRejected(UNAVAILABLE)


class NullCheckpointer:
    """Takes nothing, never stops the run."""

    written: list[Written] = []

    @staticmethod
    def register(handle: Handles) -> None:
        """``checkpoint`` and ``stop`` rejected with the reason (``handle``: the run's ``Run.handle``, in place of its
        own handlers)."""
        handle(CheckpointRequest, _Refused())
        handle(StopRequest, _Refused())

    def stopping(self) -> bool:
        return False

    def begin(self, trainer: Any, totals: Any, *, resumed: bool = False) -> None:
        return None

    def round_end(self, trainer: Any, totals: Any) -> bool:
        return False

    def stop_mid_round(self) -> None:
        return None

    def finish(self) -> None:
        return None
