"""What to chart, defined once: the default charts of a run (titles, the series they draw, which way is
better, their group), how many of a loop's own metrics are charted by themselves, which series are not shown
by default, which charts a run's config rules out (a heuristic run has no PPO update), and which config keys
tell runs apart. The console imports it; the server serves it to the web
page as JSON (``GET /ui/charts.json``), so the two cannot drift.

It is the registry of the chart list as ``leyline.kinds`` is of the kinds: the machine's charts are the core's
(``SYSTEM_CHARTS``, what any run may have), and each client declares its own charts and rules beside its payloads
(Esper's: ``leyline.esper.charts``), registered here (``CLIENT_CHARTS``, ``UNAVAILABLE``); the core names none of
their series (a test holds it). A chart's rows are ``leyline.chart_spec``'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from leyline.chart_spec import LOWER_IS_BETTER_WORDS, ChartDef, Unavailable, name_matches
from leyline.esper.charts import ESPER_CHARTS, ESPER_UNAVAILABLE

__all__ = [
    "CLIENT_CHARTS", "DEFAULT_CHARTS", "HIDDEN_METRICS", "HIDDEN_PARAMS", "LOWER_IS_BETTER_WORDS", "OWN_CHARTS",
    "PARAM_COLUMNS", "SYSTEM_CHARTS", "SYSTEM_GROUP", "UNAVAILABLE", "ChartDef", "Unavailable", "definition",
    "differing_params", "hidden_charts", "name_matches",
]


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

CLIENT_CHARTS: tuple[tuple[ChartDef, ...], ...] = (ESPER_CHARTS,)
"""Each client's charts, declared beside its payloads (``leyline.esper.charts``): shown where a run has their
series, so a run of another loop shows none of them."""
UNAVAILABLE: tuple[Unavailable, ...] = (*ESPER_UNAVAILABLE,)
"""What a run's config rules out, each client's rules (Esper's: a heuristic policy makes no PPO update)."""

DEFAULT_CHARTS: tuple[ChartDef, ...] = (*(chart for family in CLIENT_CHARTS for chart in family), *SYSTEM_CHARTS)
"""After a loop's own metrics (a chart each, first): the clients' charts (Esper's), then the machine's; any
other series is a chart away (the picker)."""

OWN_CHARTS = 12
"""A loop's own metrics (``run.log``) charted by themselves at most, first, in name order."""

HIDDEN_METRICS = ("system.",)
"""Series prefixes never offered as a run's own metric (the machine's: in their group, or picked by hand)."""

HIDDEN_PARAMS = ("run_name", "log_dir", "server", "token", "seed_base", "resume")
"""Config keys (or key suffixes) that never tell runs apart: where a run wrote, how it was started."""

PARAM_COLUMNS = 6
"""Differing config keys shown beside runs at most (the runs table, the parallel coordinates)."""



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
