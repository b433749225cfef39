"""``NullCheckpointer``: a run that takes no checkpoints runs the same loop (no ``if checkpoints`` in it).

``checkpoint`` and ``stop`` are then answered by the command processor's default: rejected, with the reason.
"""

from __future__ import annotations

from typing import Any

from trainer.checkpoint.files import Written


class NullCheckpointer:
    """Takes nothing, never stops the run."""

    written: list[Written] = []

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
