"""Rules on any series of a run (``leyline.series``): a threshold, NaN, or no new point for a while.

A series' latest point is the last of its newest chunk (``store.series_sql`` keeps points in id order;
the series pass writes them about a second after their events are stored), read for the running runs and
the series names the rules watch. ``threshold`` and ``nan`` fire per series key
(``epoch_completed.accuracy{env=2,rank=0}``) and resolve when its latest point is back in range;
``stale`` fires per series name when none of its keys got a point for ``after_s`` (server time, counted
from when this server saw the newest point change) and resolves with the next point. All resolve when the
run stops running.

NaN and infinity travel as ``null`` in JSON, which the contract reads as "not measured": a ``nan`` rule
fires when the series' value is not finite, or when its field arrived without a value while the other
fields of the same event kind and labels still did (``Latest.kind_ts`` is later than its own point).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from leyline.run_keys import shown_key
from leyline.series import parse_key
from nissa_server.alerts.rules import Rule
from nissa_server.store.conn import Conn

SERIES_CONDITIONS = ("threshold", "nan", "stale")
PHASE_SERIES = "phase_timing.phases.wall_ms"
"""Each rank's wall time per phase of a round; its ``train`` phase is the rank's own work (no waiting for
the others), what the straggler rule compares."""


@dataclass(frozen=True)
class Latest:
    """The newest point of one series of a running run."""

    run_key: int
    run_id: str
    run_name: str
    series: str
    key: str
    value: float
    ts: float
    kind_ts: float = -math.inf
    """``nan`` rules: the newest point of any series of the same kind and labels (its event's other fields)."""
    shown: str = ""
    """Its key as its run shows it (``leyline.run_keys``: the rank only in a run of several), what an alert names;
    empty: ``key``."""

    @property
    def subject(self) -> str:
        """What an alert on this series names: its key as its run shows it."""
        return self.shown or self.key


_NEWEST = (" c.id = (SELECT MAX(id) FROM series_chunks d WHERE d.run_key = c.run_key AND d.name = c.name"
           " AND d.key = c.key)")


def read_latest(conn: Conn, names: list[str], kinds: list[str]) -> list[Latest]:
    """The newest point of each series called one of ``names`` in the running runs; with its kind's newest
    point of the same labels for the kinds of ``kinds`` (the ``nan`` rules')."""
    if not names:
        return []
    marks = ",".join("?" * len(names))
    execute = getattr(conn, "execute_binary", conn.execute)  # PostgreSQL: blobs as bytes
    rows = execute(
        "SELECT c.run_key, r.run_id, r.name, c.name, c.key, c.value, c.ts_max, r.world_size FROM series_chunks c"
        " JOIN runs r"
        f" USING (run_key) WHERE r.status IN ('live', 'degraded') AND c.name IN ({marks}) AND{_NEWEST}",
        tuple(names)).fetchall()
    newest: dict[tuple[int, str, tuple], float] = {}
    for kind in kinds:
        for run_key, key, ts in conn.execute(
                "SELECT c.run_key, c.key, c.ts_max FROM series_chunks c JOIN runs r USING (run_key)"
                f" WHERE r.status IN ('live', 'degraded') AND c.name LIKE ? AND{_NEWEST}", (f"{kind}.%",)).fetchall():
            slot = (run_key, kind, tuple(sorted(parse_key(key)[1].items())))
            newest[slot] = max(newest.get(slot, -math.inf), ts)
    out = []
    for run_key, run_id, run_name, name, key, value, ts, world in rows:
        slot = (run_key, name.split(".")[0], tuple(sorted(parse_key(key)[1].items())))
        out.append(Latest(run_key, run_id, run_name, name, key, float(np.frombuffer(bytes(value)[-8:], np.float64)[0]),
                          ts, newest.get(slot, -math.inf), shown_key(key, int(world))))
    return out


def _selected(rule: Rule, point: Latest) -> bool:
    name, labels = parse_key(rule.series)
    if point.series != name or not rule.matches(point.run_id, point.run_name):
        return False
    got = parse_key(point.key)[1]
    return all(got.get(k) == v for k, v in labels.items())


def _out_of_range(rule: Rule, point: Latest) -> str | None:
    """Why ``point`` fires ``rule`` (threshold or nan), or None."""
    value = point.value
    if rule.when == "nan":
        if not math.isfinite(value):
            return f"is {value}"
        return "arrived without a value (NaN or infinity)" if point.kind_ts > point.ts else None
    if math.isnan(value):
        return None
    if rule.below is not None and value < rule.below:
        return f"= {value:.4g}, below {rule.below:g}"
    if rule.above is not None and value > rule.above:
        return f"= {value:.4g}, above {rule.above:g}"
    return None


class SeriesWatch:
    """Memory of when each watched series last got a point, and the series rules' verdicts."""

    def __init__(self) -> None:
        self._fresh: dict[tuple[int, str], tuple[float, float]] = {}
        """(run key, series name) → (newest point's ts, server time it was first seen)."""
        self._out_since: dict[tuple[str, int, str], float] = {}
        """(rule, run key, series key) → server time a check first saw its latest point out of range."""

    def observe(self, latest: list[Latest], now: float) -> None:
        newest: dict[tuple[int, str], float] = {}
        for p in latest:
            key = (p.run_key, p.series)
            newest[key] = max(newest.get(key, -math.inf), p.ts)
        for key, ts in newest.items():
            if self._fresh.get(key, (None, 0.0))[0] != ts:
                self._fresh[key] = (ts, now)
        for key in set(self._fresh) - set(newest):
            del self._fresh[key]

    def firing(self, rule: Rule, latest: list[Latest], now: float) -> list[tuple[Latest, str, str]]:
        """(point, subject, message) of each condition of ``rule`` that holds."""
        out = []
        if rule.when == "stale":
            seen: set[int] = set()
            for p in latest:
                if p.run_key in seen or not _selected(rule, p):
                    continue
                seen.add(p.run_key)
                age = now - self._fresh.get((p.run_key, p.series), (None, now))[1]
                if age >= rule.after_s:
                    out.append((p, p.series, f"no new point of {p.series} for {age:.0f} s"))
            return out
        for p in latest:
            if _selected(rule, p):
                why = _out_of_range(rule, p)
                held = self._held(rule, p, why is not None, now)
                if why is not None and held >= rule.for_s:
                    out.append((p, p.subject, f"{p.subject} {why}" + (f" for {held:.0f} s" if rule.for_s else "")))
        if rule.for_s:  # series of runs no longer running are forgotten
            current = {(rule.name, p.run_key, p.key) for p in latest}
            for key in [k for k in self._out_since if k[0] == rule.name and k not in current]:
                del self._out_since[key]
        return out

    def _held(self, rule: Rule, p: Latest, out_of_range: bool, now: float) -> float:
        """How long checks have seen ``p``'s series out of range for ``rule`` (0 when it is in range now)."""
        key = (rule.name, p.run_key, p.key)
        if not out_of_range:
            self._out_since.pop(key, None)
            return 0.0
        return now - self._out_since.setdefault(key, now)

    def ended(self, rule: Rule, run_key: int, subject: str, latest: list[Latest], now: float) -> str | None:
        """Why a firing alert of ``rule`` on (run, subject) ended, or None while it holds (or is unknown)."""
        if rule.when == "stale":
            fresh = self._fresh.get((run_key, subject))
            return None if fresh is None or now - fresh[1] >= rule.after_s else f"{subject} has new points"
        # An alert that fired before subjects were shown as the run shows them names the stored key: both are read.
        point = next((p for p in latest if p.run_key == run_key and subject in (p.subject, p.key)), None)
        if point is None or _out_of_range(rule, point) is not None:
            return None
        return f"{subject} = {point.value:.4g}"


class StragglerWatch:
    """Which ranks of a run take longer than the others to train, and since when: each rank's latest
    ``train`` phase time against the median of the other ranks' (a slow rank drags no median of its own)."""

    def __init__(self) -> None:
        self._since: dict[tuple[int, int], float] = {}
        self._latest: dict[tuple[int, int], tuple[Latest, float]] = {}

    def observe(self, latest: list[Latest], now: float, factor: float
                ) -> dict[tuple[int, int], tuple[float, Latest, float]]:
        """(run key, rank) → (since when over ``factor`` times the other ranks' median, its point, that median)."""
        by_run: dict[int, dict[int, Latest]] = {}
        for p in latest:
            labels = parse_key(p.key)[1]
            if p.series == PHASE_SERIES and labels.get("phase") == "train" and labels.get("rank", "").isdigit():
                by_run.setdefault(p.run_key, {})[int(labels["rank"])] = p
        self._latest = {}
        out = {}
        for run_key, ranks in by_run.items():
            if len(ranks) < 2:
                continue
            for rank, point in ranks.items():
                others = sorted(q.value for r, q in ranks.items() if r != rank and math.isfinite(q.value))
                if not others or not math.isfinite(point.value):
                    continue
                median = float(np.median(others))
                self._latest[(run_key, rank)] = (point, median)
                if point.value > factor * median:
                    since = self._since.setdefault((run_key, rank), now)
                    out[(run_key, rank)] = (since, point, median)
                else:
                    self._since.pop((run_key, rank), None)
        for key in set(self._since) - set(out):
            del self._since[key]
        return out

    def caught_up(self, run_key: int, rank: int | None, factor: float) -> str | None:
        """Why a straggler alert on ``rank`` ended (its training phase is within ``factor`` of the median)."""
        found = self._latest.get((run_key, rank)) if rank is not None else None
        if found is None:
            return None
        point, median = found
        return None if point.value > factor * median else f"rank {rank} trains in {point.value:.0f} ms, the " \
            f"others' median {median:.0f} ms"
