"""Trials handed to agents: a lease per trial, renewed while its agent says its process runs; new trials asked
of the sweep's sampler as agents have room. Inside the writer's transaction, so two agents (or two servers)
never take one trial."""

from __future__ import annotations

from leyline.sweeps import Lease, LeasedTrial, LeaseGranted
from nissa_server.store import sweeps_sql as q
from nissa_server.store.conn import Conn
from nissa_server.store.sweeps_sql import SweepRow, TrialRow
from nissa_server.sweeps import search
from nissa_server.sweeps.decide import GRACE_S


def _renew(conn: Conn, sweep: SweepRow, req: Lease, rows: list[TrialRow], now: float, lease_s: float) -> list[int]:
    """Renew the leases of the trials the agent still runs; those the sweep ended come back, to be stopped."""
    mine = {r.trial_id: r for r in rows if r.agent == req.agent}
    stop = []
    for trial_id in req.running:
        row = mine.get(trial_id)
        if row is None or row.status != "running":
            stop.append(trial_id)
        elif str(trial_id) not in req.exited:
            q.update_trial(conn, sweep.sweep_id, trial_id, lease_until=now + lease_s)
    for key, code in req.exited.items():
        row = mine.get(int(key)) if key.isdigit() else None
        if row is not None and row.status == "running":  # its run's end may still be on its way: a grace
            q.update_trial(conn, sweep.sweep_id, row.trial_id, exit_code=code,
                           lease_until=min(row.lease_until or now, now + GRACE_S))
    return stop


def _next(conn: Conn, sweep: SweepRow, rows: list[TrialRow], now: float) -> TrialRow | None:
    """The trial to run next: one queued again, or a new one from the sampler while the budget lasts."""
    queued = [r for r in rows if r.status == "queued"]
    if queued:
        return queued[0]
    if sum(1 for r in rows if r.origin is None) >= sweep.spec.budget:
        return None
    live = [r for r in rows if r.status != "lost"]
    params = search.ask(sweep.spec, live, q.reports(conn, sweep.sweep_id))
    trial_id = q.new_trial(conn, sweep.sweep_id, params, now)
    row = next(r for r in q.trials(conn, sweep.sweep_id) if r.trial_id == trial_id)
    rows.append(row)
    return row


def lease(conn: Conn, sweep_id: str, req: Lease, now: float, lease_s: float) -> LeaseGranted | None:
    """What the agent of ``req`` runs now (None: no such sweep)."""
    sweep = q.get_sweep(conn, sweep_id, lock=True)
    if sweep is None:
        return None
    rows = q.trials(conn, sweep_id)
    stop = _renew(conn, sweep, req, rows, now, lease_s)
    granted: list[LeasedTrial] = []
    if sweep.status == "running":
        free = min(req.slots, sweep.spec.parallel - sum(1 for r in rows if r.status == "running"))
        for _ in range(max(0, free)):
            row = _next(conn, sweep, rows, now)
            if row is None:
                break
            first_check = sweep.spec.pbt_settings.interval if sweep.method == "pbt" else 0
            q.update_trial(conn, sweep_id, row.trial_id, status="running", agent=req.agent,
                           lease_until=now + lease_s, next_check=row.next_check or first_check)
            row.status = "running"
            granted.append(LeasedTrial(trial_id=row.trial_id, run_id=row.run_id, params=row.params))
    return LeaseGranted(trials=granted, stop=stop, lease_s=lease_s, done=sweep.status != "running",
                        method=sweep.spec.method, command=list(sweep.spec.command), name=sweep.name,
                        project=sweep.project)
