"""How an Esper run ended: the end every run reports (``RunFinished``: status, duration, error) and Esper's own
results, which it reports as its summaries (``run.summary["final_accuracy"] = …``), as any loop reports its own.
Nothing of Esper's sits in the generic ``run_finished``."""

from __future__ import annotations

from typing import Literal

import msgspec

from leyline.payloads import RunFinished

SUMMARY_NAMES: tuple[str, ...] = ("final_accuracy", "best_accuracy", "fossilized", "pruned", "rounds")
"""Esper's results, the names of its run's summaries: the accuracy reached at the end (mean over the envs) and the
best seen, the seeds fossilized and pruned, the rounds done."""


class EsperOutcome(msgspec.Struct, kw_only=True, frozen=True):
    """What ``esper-train`` reports at its end; None: not known (a run cut short before a round ended)."""

    status: Literal["completed", "failed", "interrupted", "stopped"]
    duration_s: float
    error: str | None = None
    epochs: int = 0
    rounds: int | None = None
    final_accuracy: float | None = None
    best_accuracy: float | None = None
    fossilized: int | None = None
    pruned: int | None = None

    def finished(self) -> RunFinished:
        """The run's ``run_finished``: what every run's end says."""
        return RunFinished(status=self.status, duration_s=self.duration_s, error=self.error)

    def summaries(self) -> dict[str, float]:
        """Esper's results known at the end, by summary name (``SUMMARY_NAMES``)."""
        return {name: float(value) for name in SUMMARY_NAMES if (value := getattr(self, name)) is not None}
