"""A run's summaries: every series summarised (last, min, max, best, count, step), and what a loop says of
its own results: how a metric is best (``min``, ``max`` or ``last``) and values set outright
(``run.summary["test_acc"] = 0.91``), carried by ``run_started`` and ``summary`` events
(``leyline.metrics.SummaryUpdated``).

A series' *best* follows its direction: declared by the loop (``nissa.init(summary={"val_loss": "min"})``,
``run.define_metric``), else read from the last word of its name (``MIN_WORDS``, ``MAX_WORDS``: ``val_loss`` is a
loss, minimised; ``top1_acc`` an accuracy, maximised; ``loss_scale`` a scale and ``grad_accum_steps`` a count of
steps, neither: their best is their last value), else its last value. ``best_of`` says which statistic is best
for a direction; the stores' SQL is generated from the same table (``BEST_STAT``). A value set outright is its
series' last and best from then on (at the step it was set), and counts in its min, max and count like a point.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, TypeVar

import msgspec

from leyline.text import scrub

Direction = Literal["min", "max", "last"]
DIRECTIONS: tuple[Direction, ...] = ("min", "max", "last")
STATS: tuple[str, ...] = ("last", "min", "max", "best", "count", "step")
"""What each series' summary holds."""
MIN_WORDS: frozenset[str] = frozenset({"loss", "error", "err", "perplexity", "ppl", "mse", "mae", "regret"})
"""A metric whose name ends in one of these words is best at its lowest (``val_loss``, ``test/mse``)."""
MAX_WORDS: frozenset[str] = frozenset({"acc", "accuracy", "f1", "auc", "precision", "recall", "bleu", "reward",
                                       "return", "score"})
"""A metric whose name ends in one of these words is best at its highest (``val_acc``, ``episode_return``)."""
BEST_STAT: dict[str, str] = {"min": "min", "max": "max"}
"""Which statistic is a series' best, by its direction; any other direction (``last``): its last value."""
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


_T = TypeVar("_T")
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+[0-9]*(?![a-z])")
"""A word of a name: names split at anything not a letter or digit and where a lower case letter meets an upper
case one (``val_loss``, ``valLoss``, ``eval/BLEU``)."""


def words_of(name: str) -> list[str]:
    """The words of a metric's name, in lower case, numbers alone left out (``recall@10`` → ``["recall"]``)."""
    return [w.lower() for w in _WORD.findall(name) if not w.isdigit()]


def direction_of(name: str, declared: dict[str, str] | None = None) -> str:
    """How the metric ``name`` is best: as declared, else by the last word of its name (``MIN_WORDS``,
    ``MAX_WORDS``), else ``last``."""
    if declared and name in declared:
        return declared[name]
    words = words_of(name)
    last = words[-1] if words else ""
    return "min" if last in MIN_WORDS else "max" if last in MAX_WORDS else "last"


def best_of(direction: str, *, min: _T, max: _T, last: _T) -> _T:  # noqa: A002 - named as the statistics are
    """A series' best, of its ``min``, ``max`` and ``last``, by its ``direction`` (``BEST_STAT``)."""
    return {"min": min, "max": max, "last": last}[BEST_STAT.get(direction, "last")]


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
    """``PATCH /runs/{run_id}``: what to change of a run (a field left out stays as it is). Tags, group and
    project hold no control character (their patterns refuse one: a 422 naming the field); the notes keep theirs
    as ingest keeps a run's texts: each stored as U+FFFD (``leyline.text.scrub``)."""

    tags: Tags | None = None
    """The run's tags, all of them (``[]``: none)."""
    notes: Notes | None = None
    group: Project | None = None
    project: Project | None = None

    def __post_init__(self) -> None:
        if self.notes is not None:
            self.notes = scrub(self.notes)
