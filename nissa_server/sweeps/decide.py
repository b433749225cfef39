"""One sweep's decisions, taken inside the writer's transaction against its rows: trials whose runs ended,
leases that expired (the trial is ``lost`` and queued again), what the metric reached, which trials the
pruner stops, PBT's exploits and how far each has come. What must reach a run (a stop, a checkpoint to
share, a restore) comes back as ``Ask``s, sent as commands once the transaction has committed."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from leyline import CommandRecord, CommandStatus, RunStatus
from leyline.sweeps import FINISHED_TRIALS, Exploit
from nissa_server.store import queries
from nissa_server.store import sweeps_sql as q
from nissa_server.store.conn import Conn
from nissa_server.store.sweeps_sql import ExploitRow, SweepRow, TrialRow
from nissa_server.sweeps import pbt, search

SETTLE_S = 3.0
"""How long after a trial's run ended its metric is still followed (its last values are charted a little after),
and so how long the last trial's end comes before its sweep's."""
GRACE_S = 15.0
"""How long a trial whose process exited may take for its run's end to arrive before it is failed."""

_ENDED = {RunStatus.FINISHED: "finished", RunStatus.STOPPED: "stopped", RunStatus.INTERRUPTED: "failed",
          RunStatus.FAILED: "failed"}


@dataclass(frozen=True)
class Ask:
    """A command a decision needs sent: ``kind`` ``stop``, ``checkpoint`` (shared) or ``restore``."""

    kind: str
    run_id: str
    key: str
    """Idempotency-Key: a decision sent twice (a retry, two servers) makes one command."""
    reason: str
    trial_id: int = 0
    n: int = 0
    """The exploit this serves (checkpoint, restore)."""
    source_run_id: str = ""
    artifact: str = ""
    values: dict | None = None
    sweep_id: str = ""
    """The sweep whose exploit this serves (checkpoint, restore)."""


def _ended(conn: Conn, sweep: SweepRow, row: TrialRow, status: str, now: float) -> None:
    q.update_trial(conn, sweep.sweep_id, row.trial_id, status=status, lease_until=None, ended_at=now)
    row.ended_at = now
    if status == "lost" and sweep.status == "running":  # its values get another go, as a new trial
        q.new_trial(conn, sweep.sweep_id, row.params, now, origin=row.trial_id,
                    next_check=row.next_check and sweep.spec.pbt_settings.interval)


def _follow(conn: Conn, sweep: SweepRow, row: TrialRow, now: float,
            states: dict[str, tuple[str, float | None, float | None, int | None]]) -> tuple[int, int, float] | None:
    """Bring a running trial up to date with its run; the metric's new report, if any."""
    state = states.get(row.run_id)
    report = None
    if state is not None:
        status, last, best, step = state
        if step is not None and last is not None and (row.step is None or step > row.step):
            q.update_trial(conn, sweep.sweep_id, row.trial_id, metric=last, best=best, step=step)
            row.metric, row.best, row.step = last, best, step
            report = (row.trial_id, step, last)
        elif step is None and last is not None and last != row.metric:  # a summary set outright (at the end)
            q.update_trial(conn, sweep.sweep_id, row.trial_id, metric=last, best=best)
            row.metric, row.best = last, best
        ended = _ENDED.get(RunStatus(status))
        if ended is not None:
            if ended == "failed":
                row.message = q.run_error(conn, row.run_id)[:500] or "its run failed"
                q.update_trial(conn, sweep.sweep_id, row.trial_id, message=row.message)
            _ended(conn, sweep, row, ended if row.status == "running" else row.status, now)
            row.status = ended
            return report
    if row.lease_until is not None and row.lease_until < now:
        if row.exit_code not in (None, 0):
            q.update_trial(conn, sweep.sweep_id, row.trial_id, message=f"its process exited with code {row.exit_code}")
            _ended(conn, sweep, row, "failed", now)
            row.status = "failed"
        else:
            why = ("its process exited without ending its run" if row.exit_code == 0
                   else "its agent stopped renewing the lease")
            q.update_trial(conn, sweep.sweep_id, row.trial_id, message=why)
            _ended(conn, sweep, row, "lost", now)
            row.status = "lost"
    return report


def _settle(conn: Conn, sweep: SweepRow, row: TrialRow,
            states: dict[str, tuple[str, float | None, float | None, int | None]]) -> None:
    """An ended trial's last values, charted after its end."""
    state = states.get(row.run_id)
    if state is not None and state[1] is not None and (state[1], state[2], state[3]) != (row.metric, row.best,
                                                                                           row.step):
        q.update_trial(conn, sweep.sweep_id, row.trial_id, metric=state[1], best=state[2], step=state[3])
        row.metric, row.best, row.step = state[1], state[2], state[3]


def decide(conn: Conn, sweep_id: str, now: float | None = None) -> list[Ask]:
    """Every decision due for the sweep ``sweep_id`` (see the module docstring)."""
    now = time.time() if now is None else now
    sweep = q.get_sweep(conn, sweep_id, lock=True)
    if sweep is None:
        return []
    rows = q.trials(conn, sweep_id)
    running = [r for r in rows if r.status == "running"]
    if sweep.status != "running":  # an ended sweep's trials still running are followed to their ends, no further
        states = q.run_states(conn, [r.run_id for r in running], sweep.spec.metric.name)
        for row in running:
            _follow(conn, sweep, row, now, states)
        return []
    settling = [r for r in rows if r.status != "lost" and r.ended_at is not None and now - r.ended_at < SETTLE_S]
    states = q.run_states(conn, [r.run_id for r in running + settling], sweep.spec.metric.name)
    for row in settling:
        _settle(conn, sweep, row, states)
    fresh = [rep for r in running if (rep := _follow(conn, sweep, r, now, states)) is not None]
    q.add_reports(conn, sweep_id, fresh)
    asks = _prune(conn, sweep, rows, [rep[0] for rep in fresh])
    if sweep.method == "pbt":
        asks += _exploit(conn, sweep, rows, now)
    broken = _broken(sweep, rows)
    if broken is not None:
        return asks + _stop_all(conn, sweep, rows, broken, now)
    _maybe_finish(conn, sweep, q.trials(conn, sweep_id), now)
    return asks


BROKEN_AFTER = 3
"""Trials that failed before their first step, and none reached one, after which a sweep stops: its command
is broken (a PBT sweep stops at the first, its population being incomplete without it)."""


def _broken(sweep: SweepRow, rows: list[TrialRow]) -> str | None:
    early = [r for r in rows if r.status == "failed" and r.step is None]
    if not early or any(r.step is not None for r in rows):
        return None if sweep.method != "pbt" or not early else f"trial {early[0].trial_id} failed: {early[0].message}"
    if sweep.method == "pbt" or len(early) >= BROKEN_AFTER:
        return f"{len(early)} trial(s) failed before their first step: {early[0].message}"
    return None


def stop_trials(conn: Conn, sweep: SweepRow, rows: list[TrialRow], reason: str) -> list[Ask]:
    """Queued trials end ``stopped``; running ones are asked to stop through their runs."""
    asks = []
    for row in rows:
        if row.status == "queued":
            q.update_trial(conn, sweep.sweep_id, row.trial_id, status="stopped", message=reason[:500])
        elif row.status == "running":
            asks.append(Ask("stop", row.run_id, f"sweep:{sweep.sweep_id}:{row.trial_id}:stop", reason[:500]))
    return asks


def _stop_all(conn: Conn, sweep: SweepRow, rows: list[TrialRow], reason: str, now: float) -> list[Ask]:
    asks = stop_trials(conn, sweep, rows, reason)
    q.end_sweep(conn, sweep.sweep_id, "stopped", reason[:500], now)
    return asks


def _prune(conn: Conn, sweep: SweepRow, rows: list[TrialRow], candidates: list[int]) -> list[Ask]:
    verdicts = search.prune(sweep.spec, [r for r in rows if r.status != "lost"], q.reports(conn, sweep.sweep_id),
                            [t for t in candidates if any(r.trial_id == t and r.status == "running" for r in rows)])
    asks = []
    by_id = {r.trial_id: r for r in rows}
    for v in verdicts:
        q.update_trial(conn, sweep.sweep_id, v.trial_id, attrs=v.attrs)
        if not v.prune:
            continue
        row = by_id[v.trial_id]
        early = sweep.spec.early_stop
        why = (f"pruned by {early.kind if early else 'the pruner'} at step {v.step}: "
               f"{sweep.spec.metric.name} = {v.value:.6g} is behind the trials it was ranked with")
        q.update_trial(conn, sweep.sweep_id, v.trial_id, status="pruned", message=why)
        row.status = "pruned"
        asks.append(Ask("stop", row.run_id, f"sweep:{sweep.sweep_id}:{v.trial_id}:prune", why, v.trial_id))
    return asks


def _maybe_finish(conn: Conn, sweep: SweepRow, rows: list[TrialRow], now: float) -> None:
    open_ = [r for r in rows if r.status not in FINISHED_TRIALS
             or (r.status != "lost" and r.ended_at is not None and now - r.ended_at < SETTLE_S)]
    made = sum(1 for r in rows if r.origin is None)
    if not open_ and made >= sweep.spec.budget:
        best = best_trial(sweep, rows)
        q.end_sweep(conn, sweep.sweep_id, "finished", "" if best is None else f"best: trial {best}", now)


def best_trial(sweep: SweepRow, rows: list[TrialRow]) -> int | None:
    scored = [r for r in rows if r.metric is not None and r.status != "lost"]
    if not scored:
        return None
    pick = min if sweep.spec.metric.goal == "minimize" else max
    return pick(scored, key=lambda r: r.metric if r.metric is not None else 0.0).trial_id


# --- PBT ----------------------------------------------------------------------------------------------


def _exploit(conn: Conn, sweep: SweepRow, rows: list[TrialRow], now: float) -> list[Ask]:
    spec, settings = sweep.spec, sweep.spec.pbt_settings
    by_id = {r.trial_id: r for r in rows}
    open_ = {e.trial_id: e for e in q.exploits(conn, sweep.sweep_id) if e.exploit.status == "pending"}
    live = [r for r in rows if r.status == "running"]
    population = [pbt.Member(r.trial_id, r.metric, r.step or 0) for r in live if r.metric is not None]
    for row in live:
        if row.step is None or row.step < row.next_check or row.trial_id in open_:
            continue
        rng = random.Random(f"{spec.seed}:{sweep.sweep_id}:{row.trial_id}:{row.next_check}")
        source = pbt.choose_source(spec, population, row.trial_id, rng)
        q.update_trial(conn, sweep.sweep_id, row.trial_id, next_check=pbt.next_check(row.step, settings.interval))
        if source is None:
            continue
        src = by_id[source]
        exploit = Exploit(step=row.step, source_trial=source, source_run_id=src.run_id, before=row.params,
                          after=pbt.explore(spec, src.params, rng), at=now)
        n = q.add_exploit(conn, sweep.sweep_id, row.trial_id, exploit)
        open_[row.trial_id] = ExploitRow(trial_id=row.trial_id, n=n, exploit=exploit, checkpoint_id=None,
                                         restore_id=None)
    asks = []
    for e in open_.values():
        ask = _advance(conn, sweep, e, by_id)
        if ask is not None:
            asks.append(ask)
    return asks


def _record(conn: Conn, command_id: str | None) -> CommandRecord | None:
    return None if command_id is None else queries.get_command(conn, command_id)


def _advance(conn: Conn, sweep: SweepRow, e: ExploitRow, by_id: dict[int, TrialRow]) -> Ask | None:
    """Where one exploit stands: the source's checkpoint asked, shared, restored in the trial, or failed."""
    target, source = by_id[e.trial_id], by_id.get(e.exploit.source_trial)
    key = f"sweep:{sweep.sweep_id}:{e.trial_id}:{e.n}"
    why = f"pbt: trial {e.trial_id} copies trial {e.exploit.source_trial} at step {e.exploit.step}"
    if target.status != "running" or source is None:
        return _fail(conn, sweep, e, "the trial ended before its exploit was applied")
    if e.checkpoint_id is None:
        return Ask("checkpoint", source.run_id, key + ":checkpoint", why, e.trial_id, e.n, sweep_id=sweep.sweep_id)
    checkpoint = _record(conn, e.checkpoint_id)
    if checkpoint is None or not checkpoint.status.terminal:
        return None
    artifact = (checkpoint.result or {}).get("artifact") if checkpoint.status == CommandStatus.COMPLETED else None
    if not isinstance(artifact, str) or not artifact:
        return _fail(conn, sweep, e, f"trial {e.exploit.source_trial}'s checkpoint was not shared "
                                     f"({checkpoint.status.value}: {checkpoint.message or 'no artifact'})")
    if e.restore_id is None:
        return Ask("restore", target.run_id, key + ":restore", why, e.trial_id, e.n, sweep_id=sweep.sweep_id,
                   source_run_id=source.run_id,
                   artifact=artifact, values=e.exploit.after)
    restore = _record(conn, e.restore_id)
    if restore is None or not restore.status.terminal:
        return None
    if restore.status != CommandStatus.COMPLETED:
        return _fail(conn, sweep, e, f"the restore {restore.status.value}: {restore.message}")
    e.exploit.status = "applied"
    e.exploit.exploit_ms = max(0.0, (restore.updated_at - checkpoint.created_at) * 1000.0)
    q.update_exploit(conn, sweep.sweep_id, e)
    q.update_trial(conn, sweep.sweep_id, e.trial_id, params=e.exploit.after)
    return None


def _fail(conn: Conn, sweep: SweepRow, e: ExploitRow, message: str) -> Ask | None:
    """The exploit failed (it asks for nothing more)."""
    e.exploit.status, e.exploit.message = "failed", message[:500]
    q.update_exploit(conn, sweep.sweep_id, e)
    return None
