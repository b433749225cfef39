"""A row of the chart list (``leyline.charts``): a chart, the series it draws, and a rule that rules a chart out on a
run. Its own module so that each client declares its charts where its payloads live (Esper's in
``leyline.esper.charts``), as it declares its kinds' rows (``leyline.kind_spec``).

A chart's series names are patterns in which ``*`` matches any characters (``ppo_update.entropy.*``: one line
per head) and nothing else is special, so that the page's matching (a few lines of JavaScript) is this one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from leyline.payloads import Payload

LOWER_IS_BETTER_WORDS = ("loss", "kl", "_ms", "norm", "dropped", "depth")
"""A series whose name holds one of these is better lower (``val.loss``, ``grad_norm``)."""


@cache
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def name_matches(pattern: str, name: str) -> bool:
    """Whether a series name is one a chart's pattern names (``*``: any characters, nothing else special)."""
    return _pattern(pattern).fullmatch(name) is not None


def series_of(payload: type[Payload], field: str = "", *sub: str) -> str:
    """The series name of a payload's field (``leyline.series``: ``<kind>.<field>[.<sub>…]``; ``*`` a pattern),
    or with no field the prefix every series of the kind shares (``ppo_update.``). Raises ValueError where the
    payload has no such field, so that a chart cannot name a series its kind never makes."""
    if field and field not in payload.__struct_fields__:
        raise ValueError(f"{payload.__name__} has no field {field!r}")
    return ".".join((payload.KIND.value, field, *sub))


@dataclass(frozen=True)
class ChartDef:
    """A chart: its title, the series names it draws (``*`` patterns), which way is better, its group."""

    title: str
    names: tuple[str, ...]
    higher_is_better: bool = True
    group: str | None = None
    """A group of charts shown only where the run has their series (``System``); None: a run's own."""

    def matches(self, name: str) -> bool:
        return any(name_matches(pattern, name) for pattern in self.names)

    @classmethod
    def of_name(cls, name: str) -> ChartDef:
        """The chart of one series, titled by its full name (``val.loss``, never ``loss``)."""
        return cls(name, (name,), higher_is_better=not any(word in name for word in LOWER_IS_BETTER_WORDS))


@dataclass(frozen=True)
class Unavailable:
    """Series a run's config rules out: a run whose config key ``key`` is ``value`` never has a series whose
    name starts with ``prefix``, so the charts of such series are hidden on it and ``why`` says so in one line
    (short enough for a console 100 columns wide)."""

    key: str
    value: str
    prefix: str
    why: str

    def rules_out(self, config: Mapping[str, object]) -> bool:
        return config.get(self.key) == self.value
