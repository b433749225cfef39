"""What to chart, defined once: the default charts of a run (titles, the series they draw, which way is
better, their group), how many of a loop's own metrics are charted by themselves, which series are not shown
by default, which charts a run's config rules out (a heuristic run has no PPO update), and which config keys
tell runs apart. The console imports it; the server serves it to the web
page as JSON (``GET /ui/charts.json``), so the two cannot drift.

A chart's series names are patterns in which ``*`` matches any characters (``ppo_update.entropy.*``: one line
per head) and nothing else is special, so that the page's matching (a few lines of JavaScript) is this one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

LOWER_IS_BETTER_WORDS = ("loss", "kl", "_ms", "norm", "dropped", "depth")
"""A series whose name holds one of these is better lower (``val.loss``, ``grad_norm``)."""


@cache
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def name_matches(pattern: str, name: str) -> bool:
    """Whether a series name is one a chart's pattern names (``*``: any characters, nothing else special)."""
    return _pattern(pattern).fullmatch(name) is not None


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


SYSTEM_GROUP = "System"
SYSTEM_CHARTS: tuple[ChartDef, ...] = tuple(
    ChartDef(f"{SYSTEM_GROUP} · {title}", names, higher, group=SYSTEM_GROUP) for title, names, higher in (
        ("GPU utilization %", ("system.gpu.utilization",), True),
        ("GPU memory %", ("system.gpu.memory_percent",), False),
        ("GPU power W", ("system.gpu.power_w",), False),
        ("GPU temperature °C", ("system.gpu.temperature_c",), False),
        ("GPU SM clock MHz", ("system.gpu.sm_clock_mhz",), True),
        ("CPU %", ("system.cpu.percent", "system.cpu.process_percent"), True),
        ("memory %", ("system.memory.percent",), False),
        ("process RSS bytes", ("system.memory.process_rss_bytes",), False),
        ("disk bytes/s", ("system.disk.*",), False),
        ("network bytes/s", ("system.network.*",), False),
    ))
"""The machine under a run (``system.*`` series, sampled by the client library): shown where a run has them."""

ESPER_CHARTS: tuple[ChartDef, ...] = (
    ChartDef("accuracy", ("epoch_completed.accuracy",)),
    ChartDef("return", ("ppo_update.episode_return",)),
    ChartDef("policy loss", ("ppo_update.policy_loss",), higher_is_better=False),
    ChartDef("value loss", ("ppo_update.value_loss",), higher_is_better=False),
    ChartDef("KL", ("ppo_update.approx_kl",), higher_is_better=False),
    ChartDef("entropy", ("ppo_update.entropy.*",)),
    ChartDef("explained variance", ("ppo_update.explained_variance",)),
    ChartDef("env-epochs/s", ("phase_timing.env_epochs_per_s",)),
)
"""What an Esper run is watched by."""

DEFAULT_CHARTS: tuple[ChartDef, ...] = (*ESPER_CHARTS, *SYSTEM_CHARTS)
"""After a loop's own metrics (a chart each, first): Esper's charts, then the machine's; any other series is
a chart away (the picker)."""

OWN_CHARTS = 12
"""A loop's own metrics (``run.log``) charted by themselves at most, first, in name order."""

HIDDEN_METRICS = ("system.",)
"""Series prefixes never offered as a run's own metric (the machine's: in their group, or picked by hand)."""

HIDDEN_PARAMS = ("run_name", "log_dir", "server", "token", "seed_base", "resume")
"""Config keys (or key suffixes) that never tell runs apart: where a run wrote, how it was started."""

PARAM_COLUMNS = 6
"""Differing config keys shown beside runs at most (the runs table, the parallel coordinates)."""


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


UNAVAILABLE: tuple[Unavailable, ...] = (
    Unavailable("policy", "heuristic", "ppo_update.",
                "a heuristic policy makes no PPO update: no return, losses, KL, entropy or explained variance"),
)
"""What an Esper run's policy cannot have."""


def hidden_charts(configs: Sequence[Mapping[str, object]],
                  charts: Sequence[ChartDef] = DEFAULT_CHARTS) -> tuple[list[str], list[str]]:
    """The titles of the charts that none of the runs (their configs) can have, and why, a line each. A chart is
    hidden where a rule rules out every one of its series for every run: an overlay keeps what one run has."""
    rules = [u for u in UNAVAILABLE if configs and all(u.rules_out(c) for c in configs)]
    titles, whys = [], []
    for rule in rules:
        out = [c.title for c in charts if all(p.startswith(rule.prefix) for p in c.names)]
        if out:
            titles += [t for t in out if t not in titles]
            whys.append(rule.why)
    return titles, whys


def _value_id(value: object) -> str:
    """A config value as JSON holds it, so that the page (``JSON.stringify``) tells the same values apart:
    ``1`` and ``1.0`` are one number there, ``True`` and ``1`` are not."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, sort_keys=True, default=repr)


def differing_params(configs: Sequence[Mapping[str, object]], limit: int | None = None) -> list[str]:
    """Config keys whose values are not the same in every run: first those the runs that have them set
    differently, then those some runs lack (an Esper run's options beside a plain loop's run)."""
    if len(configs) < 2:
        return []
    valued, absent = [], []
    for key in sorted({k for c in configs for k in c}):
        if any(key.endswith(h) for h in HIDDEN_PARAMS):
            continue
        values = {_value_id(c[key]) for c in configs if key in c}
        if len(values) > 1:
            valued.append(key)
        elif any(key not in c for c in configs):
            absent.append(key)
    keys = valued + absent
    return keys if limit is None else keys[:limit]


def definition() -> dict[str, Any]:
    """All of the above as the web page reads it (``GET /ui/charts.json``)."""
    return {"charts": [{**asdict(c), "names": list(c.names)} for c in DEFAULT_CHARTS],
            "own_charts": OWN_CHARTS, "hidden_metrics": list(HIDDEN_METRICS),
            "hidden_params": list(HIDDEN_PARAMS), "param_columns": PARAM_COLUMNS,
            "unavailable": [asdict(u) for u in UNAVAILABLE], "lower_is_better_words": list(LOWER_IS_BETTER_WORDS)}
