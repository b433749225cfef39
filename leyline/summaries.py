"""A run's summaries: every series summarised (last, min, max, best, count, step), and what a loop says of
its own results: how a metric is best (``min``, ``max`` or ``last``) and values set outright
(``run.summary["test_acc"] = 0.91``), carried by ``run_started`` and ``summary`` events
(``leyline.metrics.SummaryUpdated``).

A series' *best* follows its direction: declared by the loop (``nissa.init(summary={"val_loss": "min"})``,
``run.define_metric``), else read from its name (``DIRECTION_HINTS``: a loss or an error is minimised, an
accuracy, F1 or AUC maximised), else its last value. A value set outright is its series' last and best from
then on (at the step it was set), and counts in its min, max and count like a point.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

Direction = Literal["min", "max", "last"]
DIRECTIONS: tuple[Direction, ...] = ("min", "max", "last")
STATS: tuple[str, ...] = ("last", "min", "max", "best", "count", "step")
"""What each series' summary holds."""
DIRECTION_HINTS: tuple[tuple[str, Direction], ...] = (
    ("loss", "min"), ("error", "min"), ("acc", "max"), ("f1", "max"), ("auc", "max"),
)
"""Parts of a name that say how its metric is best, first match wins (``val_loss`` → min, ``accuracy`` → max)."""
MAX_DECLARED = 256
"""Directions or values one declaration carries at most."""

MAX_TAGS = 32
MAX_TAG_CHARS = 64
TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:+/=@-]*$(?!\n)"
"""A tag: letters, digits and ``_ . : + / = @ -``, no blank (a filter names it as ``tag:baseline``)."""
Tag = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TAG_CHARS, pattern=TAG_PATTERN)]
MAX_PROJECT_CHARS = 128
PROJECT_PATTERN = r"^([A-Za-z0-9_][A-Za-z0-9_.:+/=@-]*)?$(?!\n)"
"""A project or a group: as a tag, or empty (none)."""
Project = Annotated[str, msgspec.Meta(max_length=MAX_PROJECT_CHARS, pattern=PROJECT_PATTERN)]
MAX_NOTES_CHARS = 4000
Notes = Annotated[str, msgspec.Meta(max_length=MAX_NOTES_CHARS)]
Tags = Annotated[list[Tag], msgspec.Meta(max_length=MAX_TAGS)]
DeclaredName = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
Directions = Annotated[dict[DeclaredName, Direction], msgspec.Meta(max_length=MAX_DECLARED)]


def direction_of(name: str, declared: dict[str, str] | None = None) -> str:
    """How the metric ``name`` is best: as declared, else as its name hints (``DIRECTION_HINTS``), else ``last``."""
    if declared and name in declared:
        return declared[name]
    lowered = name.lower()
    for part, direction in DIRECTION_HINTS:
        if part in lowered:
            return direction
    return "last"


class MetricSummary(msgspec.Struct, kw_only=True):
    """One series of a run, summarised as its events were stored (null: no finite value yet)."""

    last: float | None
    min: float | None
    max: float | None
    best: float | None
    """``min``, ``max`` or ``last`` by the metric's direction; a value set outright where one was."""
    count: int
    step: int | None
    """The step of the last point (or of the value set outright)."""


class RunPatch(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``PATCH /runs/{run_id}``: what to change of a run (a field left out stays as it is)."""

    tags: Tags | None = None
    """The run's tags, all of them (``[]``: none)."""
    notes: Notes | None = None
    group: Project | None = None
    project: Project | None = None
