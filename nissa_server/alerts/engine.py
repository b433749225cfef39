"""Which alert conditions hold now: the rules applied to a snapshot of the store, taken once a sweep.

Pure bookkeeping, no I/O: ``AlertEngine.evaluate`` takes a ``Snapshot`` (read by ``read_snapshot`` on a
reader thread) and says which conditions fire (``Firing``) and which firing alerts have ended. What must
be remembered between sweeps is kept here: since when each rank has been at its step (a rank's step is
known from its heartbeats, which also say it is alive), when each straggler was first reported, and how
far the anomalies have been read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leyline import AnomalyDetected, DecodeError, RunStatus, Severity, decode_event
from nissa_server.alerts.rules import AlertRules, Rule
from nissa_server.alerts.series_rules import (
    PHASE_SERIES,
    SERIES_CONDITIONS,
    Latest,
    SeriesWatch,
    StragglerWatch,
    read_latest,
)
from nissa_server.store.alerts_sql import firing as firing_alerts
from nissa_server.store.conn import Conn

_SEVERITIES = list(Severity)


@dataclass(frozen=True)
class RankRow:
    run_key: int
    run_id: str
    name: str
    rank: int
    seen_at: float
    step: int


@dataclass(frozen=True)
class RunRow:
    run_key: int
    run_id: str
    name: str
    status: str
    detail: str | None


@dataclass(frozen=True)
class Anomaly:
    id: int
    run_key: int
    run_id: str
    name: str
    severity: Severity
    ts: float
    anomaly: str
    detail: str
    rank: int | None


@dataclass
class Snapshot:
    ranks: list[RankRow]
    """Every rank of every running run."""
    runs: list[RunRow]
    """Runs not live whose status changed lately (and every degraded one); a run lost only where a trainer
    streamed it live."""
    anomalies: list[Anomaly]
    """Anomalies stored since the last snapshot."""
    firing: list[tuple]
    """(alert id, run key, rule, subject, rank, step, seen_at, run status) of the alerts firing now."""
    last_id: int
    """The highest event id read."""
    series: list[Latest] = field(default_factory=list)
    """The newest point of each series the rules watch, in every running run."""


def last_event_id(conn: Conn) -> int:
    top = conn.execute("SELECT value FROM counters WHERE name = 'event_id'").fetchone()
    return int(top[0]) if top else 0


def read_snapshot(conn: Conn, since: float, after_id: int | None, series: tuple[list[str], list[str]]) -> Snapshot:
    ranks = [RankRow(*row) for row in conn.execute(
        "SELECT r.run_key, r.run_id, r.name, k.rank, COALESCE(k.seen_at, 0), k.last_step FROM runs r"
        " JOIN ranks k USING (run_key) WHERE r.status IN ('live', 'degraded') AND k.rank >= 0"
        " AND k.status = 'live'").fetchall()]
    # A run is lost when the trainer that streamed it live falls silent; one an upload made (no stream of it was
    # ever a live session's) is lost from birth until its end arrives: history, not a run in trouble.
    runs = [RunRow(*row) for row in conn.execute(
        "SELECT run_key, run_id, name, status, status_detail FROM runs WHERE status = 'degraded'"
        " OR (status <> 'live' AND last_seen_at >= ? AND (status <> 'lost' OR EXISTS"
        " (SELECT 1 FROM streams s WHERE s.run_key = runs.run_key AND s.session IS NOT NULL)))", (since,)).fetchall()]
    last_id = last_event_id(conn)
    anomalies = [] if after_id is None else _anomalies(conn, after_id, last_id)
    return Snapshot(ranks=ranks, runs=runs, anomalies=anomalies, firing=firing_alerts(conn), last_id=last_id,
                    series=read_latest(conn, *series))


def _anomalies(conn: Conn, after_id: int, upto_id: int) -> list[Anomaly]:
    out = []
    for id_, run_key, run_id, name, severity, body in conn.execute(
            "SELECT e.id, e.run_key, r.run_id, r.name, e.severity, e.body FROM rare_events e JOIN runs r"
            " USING (run_key) WHERE e.kind = 'anomaly_detected' AND e.id > ? AND e.id <= ? ORDER BY e.id",
            (after_id, upto_id)).fetchall():
        try:
            event = decode_event(bytes(body))
        except DecodeError:
            continue  # stored after validation: not expected; a rule cannot read it either way
        p = event.payload
        if isinstance(p, AnomalyDetected):
            out.append(Anomaly(id=id_, run_key=run_key, run_id=run_id, name=name, severity=_SEVERITIES[severity],
                               ts=event.ts, anomaly=p.anomaly, detail=p.detail,
                               rank=p.rank if p.rank is not None else event.rank))
    return out


@dataclass(frozen=True)
class Firing:
    """A condition that holds now."""

    rule: Rule
    run_key: int
    run_id: str
    subject: str
    message: str
    rank: int | None = None
    step: int | None = None
    renewed: bool = False
    """Seen again this sweep (a new matching anomaly): an alert already firing lasts longer."""


@dataclass
class Verdict:
    firing: list[Firing] = field(default_factory=list)
    resolved: list[tuple[str, Rule, str]] = field(default_factory=list)
    """(alert id, rule, why) of firing alerts whose condition was seen to end."""
    ended: list[tuple[str, Rule, str]] = field(default_factory=list)
    """(alert id, rule, what happened) of firing alerts whose run ended (finished, failed, stopped,
    interrupted) while the condition held: not resolved, and nothing more will tell."""


class AlertEngine:
    """See the module docstring."""

    def __init__(self, rules: AlertRules, *, silent_after_s: float) -> None:
        self.rules = {r.name: r for r in rules.rules}
        self.silent_after_s = silent_after_s
        self.after_id: int | None = None
        """Anomalies with a higher event id are new (None: not started; set when the server starts, so that
        anomalies stored before are history, not news)."""
        self._steps: dict[tuple[int, int], tuple[int, float]] = {}
        self._stragglers = StragglerWatch()
        self._series = SeriesWatch()

    @property
    def series_names(self) -> tuple[list[str], list[str]]:
        """The series names the rules watch (labels stripped), and the event kinds of the ``nan`` rules'."""
        from leyline.series import parse_key

        names = {parse_key(r.series)[0] for r in self.rules.values() if r.when in SERIES_CONDITIONS}
        if self._of("straggler"):
            names.add(PHASE_SERIES)
        kinds = {parse_key(r.series)[0].split(".")[0] for r in self.rules.values() if r.when == "nan"}
        return sorted(names), sorted(kinds)

    def _of(self, when: str) -> list[Rule]:
        return [r for r in self.rules.values() if r.when == when]

    def evaluate(self, snap: Snapshot, now: float) -> Verdict:
        self.after_id = snap.last_id
        verdict = Verdict()
        verdict.firing += self._status(snap)
        verdict.firing += self._hangs(snap, now)
        verdict.firing += self._anomalies(snap)
        verdict.firing += self._straggling(snap, now)
        self._series.observe(snap.series, now)
        for rule in self.rules.values():
            if rule.when in SERIES_CONDITIONS:
                verdict.firing += [Firing(rule, p.run_key, p.run_id, subject, message)
                                   for p, subject, message in self._series.firing(rule, snap.series, now)]
        verdict.resolved, verdict.ended = self._ended(snap, now)
        return verdict

    def _status(self, snap: Snapshot) -> list[Firing]:
        out = []
        for rule in self._of("status"):
            for run in snap.runs:
                if run.status in rule.statuses and rule.matches(run.run_id, run.name):
                    why = f": {run.detail}" if run.detail else ""
                    out.append(Firing(rule, run.run_key, run.run_id, run.status,
                                      f"run {run.name or run.run_id} is {run.status}{why}"))
        return out

    def _hangs(self, snap: Snapshot, now: float) -> list[Firing]:
        out, seen = [], set()
        heard_within = min((r.after_s for r in self._of("hang")), default=0.0)
        heard_within = min(heard_within, self.silent_after_s)
        for row in snap.ranks:
            key = (row.run_key, row.rank)
            seen.add(key)
            step, since = self._steps.get(key, (-1, now))
            if row.step != step or now - row.seen_at >= heard_within:
                # A new step, or a rank not heard from (stopped, then maybe resumed): its hang clock starts
                # over, so that a rank resumed after a silence is not hung for the time it was silent.
                self._steps[key] = (row.step, now)
                continue
            stuck_s = now - since
            for rule in self._of("hang"):
                # Alive: heard from within the rule's time (and before it counts as silent); a rank stopped
                # outright is silent, not hung (the status rules say degraded, then lost or failed).
                alive = now - row.seen_at < min(rule.after_s, self.silent_after_s)
                if alive and stuck_s >= rule.after_s and rule.matches(row.run_id, row.name):
                    out.append(Firing(rule, row.run_key, row.run_id, f"rank {row.rank}",
                                      f"rank {row.rank} has not advanced past step {row.step} for {stuck_s:.0f} s "
                                      f"while its heartbeats continue", rank=row.rank, step=row.step))
        for key in set(self._steps) - seen:
            del self._steps[key]  # the run or the rank stopped running
        return out

    def _anomalies(self, snap: Snapshot) -> list[Firing]:
        out = []
        for a in snap.anomalies:
            for rule in self._of("anomaly"):
                if a.severity.rank >= rule.min_severity.rank and rule.matches(a.run_id, a.name):
                    out.append(Firing(rule, a.run_key, a.run_id, a.anomaly, f"{a.anomaly}: {a.detail}",
                                      rank=a.rank, renewed=True))
        return out

    def _straggling(self, snap: Snapshot, now: float) -> list[Firing]:
        rules = self._of("straggler")
        if not rules:
            return []
        slow = self._stragglers.observe(snap.series, now, min(r.factor for r in rules))
        out = []
        for rule in rules:
            for (run_key, rank), (since, point, median) in slow.items():
                if now - since >= rule.after_s and rule.matches(point.run_id, point.run_name) \
                        and point.value > rule.factor * median:
                    out.append(Firing(rule, run_key, point.run_id, f"rank {rank}",
                                      f"rank {rank} has been a straggler for {now - since:.0f} s: its training phase "
                                      f"took {point.value:.0f} ms, {point.value / median:.1f}× the other ranks' "
                                      f"median {median:.0f} ms", rank=rank))
        return out

    def _ended(self, snap: Snapshot, now: float) -> tuple[list[tuple[str, Rule, str]], list[tuple[str, Rule, str]]]:
        """(resolved, ended) of the firing alerts: see ``Verdict``.

        A hang, straggler or series condition is judged on a running run only. Once the run is lost, its
        alerts stay as they were last seen (firing): no data says the condition ended, and the run may come
        back (a trainer resumed after SIGSTOP), when they are judged again, not fired twice."""
        steps = {(r.run_key, r.rank): r.step for r in snap.ranks}
        out, ended = [], []
        for alert_id, run_key, rule_name, subject, rank, step, seen_at, run_status in snap.firing:
            rule = self.rules.get(rule_name)
            if rule is None:
                continue  # a rule of another rules file (another server's, or before a restart): not ours to judge
            status = RunStatus(run_status)
            why = None
            if rule.when == "status":
                why = f"the run is {run_status}" if run_status not in rule.statuses else None
            elif rule.when == "anomaly":
                why = f"no {subject} for {rule.quiet_s:g} s" if now - seen_at > rule.quiet_s else None
            elif not status.running:
                if status.ended:
                    ended.append((alert_id, rule, f"the run is {run_status}"))
                continue
            elif rule.when == "hang":
                current = steps.get((run_key, rank))
                if current is not None and step is not None and current > step:
                    why = f"rank {rank} advanced to step {current}"
            elif rule.when == "straggler":
                why = self._stragglers.caught_up(run_key, rank, rule.factor)
            elif rule.when in SERIES_CONDITIONS:
                why = self._series.ended(rule, run_key, subject, snap.series, now)
            if why is not None:
                out.append((alert_id, rule, why))
        return out, ended
