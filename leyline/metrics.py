"""The free-form ``metrics`` event: named scalars of any loop at a step (``run.log`` in the client).

Values are numbers; a value that is not finite travels as the string ``"nan"``, ``"inf"`` or
``"-inf"`` (JSON has no NaN), so a diverging loss is reported as such, never as a null or a 0.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import msgspec

from leyline.enums import EventKind, Kind
from leyline.payloads import Payload
from leyline.summaries import MAX_DECLARED, Directions

MAX_METRICS = 256
"""Named values one ``metrics`` event may carry."""
MAX_LABELS = 16
MAX_METRIC_NAME_CHARS = 128

METRIC_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_./:-]*$(?!\n)"
"""What a metric or label name is (with at most ``MAX_METRIC_NAME_CHARS`` characters)."""
MetricName = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_METRIC_NAME_CHARS, pattern=METRIC_NAME_PATTERN)]
"""``loss``, ``train/loss``, ``lr:group0``: a letter or ``_`` first, then letters, digits, ``_ . / : -``."""
NonFinite = Literal["nan", "inf", "-inf"]
MetricValue = float | NonFinite
LabelValue = Annotated[str, msgspec.Meta(max_length=MAX_METRIC_NAME_CHARS)]


class Metrics(Payload, kw_only=True, frozen=True):
    """Named scalars of the run at the envelope's ``step``, with optional labels (``{"split": "val"}``)."""

    KIND: ClassVar[Kind] = EventKind.METRICS
    values: Annotated[dict[MetricName, MetricValue], msgspec.Meta(min_length=1, max_length=MAX_METRICS)]
    labels: Annotated[dict[MetricName, LabelValue], msgspec.Meta(max_length=MAX_LABELS)] = {}


class SummaryUpdated(Payload, kw_only=True, frozen=True):
    """The loop said something of its results: a metric's direction (``run.define_metric``) or a value of
    its summary set outright (``run.summary[name] = value``); neither is a point of a series."""

    KIND: ClassVar[Kind] = EventKind.SUMMARY
    values: Annotated[dict[MetricName, MetricValue], msgspec.Meta(max_length=MAX_DECLARED)] = {}
    """Values set outright (``"nan"``, ``"inf"``, ``"-inf"`` as in ``Metrics``)."""
    directions: Directions = {}


MAX_TEXT_CHARS = 16_384
"""Characters one ``text`` event may carry."""


class TextLogged(Payload, kw_only=True, frozen=True):
    """A loop's own text at the envelope's ``step`` under a tag (TensorBoard's ``add_text``): data to show as
    written, never markup."""

    KIND: ClassVar[Kind] = EventKind.TEXT
    tag: MetricName
    text: Annotated[str, msgspec.Meta(max_length=MAX_TEXT_CHARS)]


def metric_value(value: float) -> MetricValue:
    """``value`` as the contract carries it: the number, or ``"nan"``, ``"inf"``, ``"-inf"``."""
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return value


def as_float(value: MetricValue) -> float:
    """A carried value back as a float (``"nan"`` → ``nan``)."""
    return float(value)
