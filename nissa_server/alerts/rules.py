"""Alert rules: what to watch for, on which runs, and where to send it; read from a TOML file.

::

    [destinations.ops]
    urls = ["json://127.0.0.1:9000/hooks/nissa"]   # any apprise URL: slack://, discord://, mailto://, ntfy://
    max_per_minute = 20

    [[rules]]
    name = "stuck"
    when = "hang"          # status | anomaly | hang | straggler | threshold | nan | stale
    after_s = 120
    runs = "prod-*"        # a glob on the run's name (default: every run)

    [[rules]]
    name = "not learning"
    when = "threshold"     # on any series a run has (a loop's "val_loss" too), labels optional
    series = "epoch_completed.accuracy{env=0}"
    below = 0.2

The file is checked whole when the server starts; the first problem is one line naming the file, the
rule and the field (``RulesError``).
"""

from __future__ import annotations

import fnmatch
import pathlib
import tomllib
import typing
from dataclasses import dataclass, field
from typing import Any

from leyline import RunStatus, Severity
from leyline.payloads_alerts import AlertCondition
from leyline.text import scrub_tree

CONDITIONS: tuple[AlertCondition, ...] = typing.get_args(AlertCondition)
_DEFAULT_STATUSES = ("lost", "failed", "degraded")


class RulesError(ValueError):
    """The rules file cannot be used; the message is one line naming the file, rule and field."""


@dataclass(frozen=True)
class Destination:
    """Where notifications go: apprise URLs, and how many notifications a minute at most."""

    name: str
    urls: tuple[str, ...]
    max_per_minute: int = 20
    """Notifications over this within a minute wait for the next (none is dropped)."""


@dataclass(frozen=True)
class Rule:
    """One alert rule; ``when`` says which condition, the other fields tune it."""

    name: str
    when: AlertCondition
    runs: str = "*"
    """Glob on the run's name (``esper-train --run-name``), or on its id."""
    notify: tuple[str, ...] = ()
    """Destination names; empty: every destination of the file."""
    statuses: tuple[str, ...] = _DEFAULT_STATUSES
    """``status``: the run statuses that fire it (lost, failed, degraded, stopped, finished, interrupted)."""
    min_severity: Severity = Severity.WARNING
    """``anomaly``: anomalies at or above this severity."""
    after_s: float = 300.0
    """``hang``: seconds without a new step while heartbeats continue; ``straggler``: seconds straggling."""
    quiet_s: float = 600.0
    """``anomaly``: the alert resolves after this long without a new matching anomaly."""
    stacks: bool = True
    """``hang``: ask the run for every rank's stacks when it fires."""
    factor: float = 1.5
    """``straggler``: a rank whose training phase takes over this many times the other ranks' median."""
    series: str = ""
    """``threshold``, ``nan``, ``stale``: the series name (a loop's ``val_loss``, or an event kind's field such as
    ``epoch_completed.accuracy``), with labels to narrow it (``name{env=0}``)."""
    below: float | None = None
    """``threshold``: fires when the series' latest point is below this…"""
    above: float | None = None
    """…or above this."""
    for_s: float = 0.0
    """``threshold``: fires once the series has been out of range this long (server time, each check seeing its
    latest point out of range: "GPU utilisation below 40 for 10 minutes"); 0: at the first such point."""
    builtin: bool = False
    """One of ``BUILTIN_RULES``: shown in the console and ``GET /alerts``, sent to no destination."""

    def matches(self, run_id: str, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.runs) or fnmatch.fnmatchcase(run_id, self.runs)

    def describe(self) -> dict[str, Any]:
        """What ``GET /alerts/rules`` shows of it."""
        out: dict[str, Any] = {"name": self.name, "when": self.when, "runs": self.runs, "notify": list(self.notify)}
        if self.builtin:
            out["builtin"] = True
        if self.when == "status":
            out["status"] = list(self.statuses)
        elif self.when == "anomaly":
            out.update(min_severity=self.min_severity.value, quiet_s=self.quiet_s)
        else:
            if self.when not in ("threshold", "nan"):
                out["after_s"] = self.after_s
            if self.when == "hang":
                out["stacks"] = self.stacks
            if self.when == "straggler":
                out["factor"] = self.factor
            if self.series:
                out["series"] = self.series
            out.update({k: v for k, v in (("below", self.below), ("above", self.above)) if v is not None})
            if self.for_s:
                out["for_s"] = self.for_s
        return out


@dataclass(frozen=True)
class AlertRules:
    """A whole rules file."""

    rules: tuple[Rule, ...] = ()
    destinations: dict[str, Destination] = field(default_factory=dict)
    source: str = ""

    def targets(self, rule: Rule) -> list[Destination]:
        if rule.builtin:
            return []
        names = rule.notify or tuple(self.destinations)
        return [self.destinations[n] for n in names]

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "rules": [r.describe() for r in self.rules],
                "destinations": [{"name": d.name, "urls": len(d.urls), "max_per_minute": d.max_per_minute}
                                 for d in self.destinations.values()]}


BUILTIN_RULES = (
    Rule(name="hung", when="hang", after_s=300.0, stacks=True, builtin=True),
    Rule(name="run in trouble", when="status", statuses=("lost", "failed", "degraded"), builtin=True),
)
"""What every server watches for unless told not to (``nissa-server --no-default-alerts``): a rank alive but
stuck for 5 minutes (its stacks asked for), and a run lost, failed or degraded. They notify nobody; a rule of
the ``--alerts`` file with one of their names replaces it (and notifies like any rule of the file)."""


def with_builtin(rules: AlertRules) -> AlertRules:
    """``rules`` and the built-in rules whose names it does not use."""
    names = {r.name for r in rules.rules}
    builtin = tuple(r for r in BUILTIN_RULES if r.name not in names)
    source = f"{rules.source} and built-in rules" if rules.source else "built-in rules"
    return AlertRules(rules=rules.rules + builtin, destinations=rules.destinations, source=source)


def load_rules(path: pathlib.Path) -> AlertRules:
    """Read and check ``path``; ``RulesError`` with one line for the first problem."""
    try:
        data = tomllib.loads(pathlib.Path(path).read_text())
    except OSError as err:
        raise RulesError(f"{path}: cannot read: {err.strerror or err}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise RulesError(f"{path}: not valid TOML: {err}") from None
    return parse_rules(data, str(path))


def parse_rules(data: dict[str, Any], source: str = "rules") -> AlertRules:
    """The rules of ``data`` (a TOML file's tables), every text in it scrubbed first (``leyline.text.scrub``): a
    rule's name, its glob and its series reach alerts, notifications and every viewer, as a run's texts do."""
    data = scrub_tree(data)
    unknown = set(data) - {"rules", "destinations"}
    if unknown:
        raise RulesError(f"{source}: unknown top-level key {sorted(unknown)[0]!r} (expected 'rules', 'destinations')")
    destinations = {name: _destination(source, name, spec)
                    for name, spec in _table(source, "destinations", data.get("destinations", {})).items()}
    raw_rules = data.get("rules", [])
    if not isinstance(raw_rules, list) or not all(isinstance(r, dict) for r in raw_rules):
        raise RulesError(f"{source}: 'rules' must be an array of tables ([[rules]])")
    rules, names = [], set()
    for i, spec in enumerate(raw_rules):
        rule = _rule(source, i, spec, destinations)
        if rule.name in names:
            raise RulesError(f"{source}: rules[{i}] ({rule.name!r}): name: used by an earlier rule")
        names.add(rule.name)
        rules.append(rule)
    return AlertRules(rules=tuple(rules), destinations=destinations, source=source)


def _table(source: str, where: str, value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RulesError(f"{source}: {where}: must be a table")
    return value


def _destination(source: str, name: str, spec: object) -> Destination:
    where = f"{source}: destination {name!r}"
    spec = _table(source, f"destination {name!r}", spec)
    extra = set(spec) - {"urls", "max_per_minute"}
    if extra:
        raise RulesError(f"{where}: unknown field {sorted(extra)[0]!r}")
    urls = spec.get("urls")
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and "://" in u for u in urls):
        raise RulesError(f"{where}: urls: must be a non-empty list of notification URLs (scheme://…)")
    import apprise  # the library that knows every scheme

    for url in urls:
        if not apprise.Apprise().add(url):
            raise RulesError(f"{where}: urls: {url.split('://', 1)[0]}:// is not a notification URL apprise knows "
                             "(or it is malformed)")
    limit = spec.get("max_per_minute", 20)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10_000:
        raise RulesError(f"{where}: max_per_minute: must be an integer in 1..10000")
    return Destination(name=name, urls=tuple(urls), max_per_minute=limit)


_FIELDS = {"status": {"status"}, "anomaly": {"min_severity", "quiet_s"}, "hang": {"after_s", "stacks"},
           "straggler": {"after_s", "factor"}, "threshold": {"series", "below", "above", "for_s"}, "nan": {"series"},
           "stale": {"series", "after_s"}}


def _rule(source: str, i: int, spec: dict[str, Any], destinations: dict[str, Destination]) -> Rule:
    name = spec.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise RulesError(f"{source}: rules[{i}]: name: must be a non-empty string (at most 100 characters)")
    where = f"{source}: rules[{i}] ({name!r})"
    when = spec.get("when")
    if when not in CONDITIONS:
        raise RulesError(f"{where}: when: must be one of {', '.join(CONDITIONS)}, got {when!r}")
    extra = set(spec) - {"name", "when", "runs", "notify"} - _FIELDS[when]
    if extra:
        raise RulesError(f"{where}: unknown field {sorted(extra)[0]!r} for when = {when!r}")
    kw: dict[str, Any] = {"name": name, "when": when}
    runs = spec.get("runs", "*")
    if not isinstance(runs, str) or not runs:
        raise RulesError(f"{where}: runs: must be a glob on run names, such as 'prod-*'")
    kw["runs"] = runs
    notify = spec.get("notify", [])
    if not isinstance(notify, list) or not all(isinstance(n, str) for n in notify):
        raise RulesError(f"{where}: notify: must be a list of destination names")
    for n in notify:
        if n not in destinations:
            raise RulesError(f"{where}: notify: no destination {n!r} (define [destinations.{n}])")
    kw["notify"] = tuple(notify)
    if "status" in spec:
        kw["statuses"] = _statuses(where, spec["status"])
    if "min_severity" in spec:
        try:
            kw["min_severity"] = Severity(spec["min_severity"])
        except ValueError:
            raise RulesError(f"{where}: min_severity: must be one of "
                             f"{', '.join(s.value for s in Severity)}") from None
    for key in ("after_s", "quiet_s"):
        if key in spec:
            value = spec[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 7 * 86400:
                raise RulesError(f"{where}: {key}: must be a number of seconds in (0, 604800]")
            kw[key] = float(value)
    if "for_s" in spec:
        value = spec["for_s"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 7 * 86400:
            raise RulesError(f"{where}: for_s: must be a number of seconds in [0, 604800]")
        kw["for_s"] = float(value)
    if when in ("threshold", "nan", "stale"):
        kw["series"] = _series(where, spec.get("series"))
    if "factor" in spec:
        factor = spec["factor"]
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 < factor <= 100:
            raise RulesError(f"{where}: factor: must be a number in (1, 100]")
        kw["factor"] = float(factor)
    for key in ("below", "above"):
        if key in spec:
            value = spec[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise RulesError(f"{where}: {key}: must be a number")
            kw[key] = float(value)
    if when == "threshold" and "below" not in kw and "above" not in kw:
        raise RulesError(f"{where}: below/above: a threshold rule needs 'below' or 'above' (or both)")
    if "stacks" in spec:
        if not isinstance(spec["stacks"], bool):
            raise RulesError(f"{where}: stacks: must be true or false")
        kw["stacks"] = spec["stacks"]
    return Rule(**kw)


def _series(where: str, value: object) -> str:
    from leyline.series import parse_key

    # Any name a run has: a loop's own metric (``val_loss``, as ``GET …/series/val_loss`` names it) or a field
    # of an event kind (``epoch_completed.accuracy``).
    if not isinstance(value, str) or not value.strip():
        raise RulesError(f"{where}: series: must name a series, such as 'val_loss' or 'epoch_completed.accuracy' "
                         "(with labels to narrow it: 'epoch_completed.accuracy{env=0}')")
    try:
        name, _ = parse_key(value)
    except ValueError as err:
        raise RulesError(f"{where}: series: {err}") from None
    if not name:
        raise RulesError(f"{where}: series: {value!r} has labels but no name")
    return value


def _statuses(where: str, value: object) -> tuple[str, ...]:
    known = [s.value for s in RunStatus if s is not RunStatus.LIVE]
    if not isinstance(value, list) or not value or not all(v in known for v in value):
        raise RulesError(f"{where}: status: must be a non-empty list of {', '.join(known)}")
    return tuple(value)
