"""What a run achieved, as ``GET /runs`` summarises it for runs tables (the server's page and the console's)."""

from __future__ import annotations

import msgspec


class RunOutcome(msgspec.Struct, kw_only=True):
    """What an Esper run achieved (null where unknown: a live run, or not an Esper run)."""

    final_accuracy: float | None = None
    best_accuracy: float | None = None
    fossilized: int | None = None
    pruned: int | None = None
    rounds: int | None = None
    policy: str | None = None
