"""Alerts and their notifications, in both stores: the same SQL, inside the writer's transactions.

An alert is one row from the moment its rule fires on a run until its condition ends; ``open_key``
(rule, run, subject) is unique while it fires, so two servers that see the same condition at once open
one alert: the second insert finds the first and does nothing. Each alert's notifications (one per
destination, one for firing and one for resolved) wait in ``alert_notices`` until a server claims them;
a claim lasts ``claim_s`` so that a server that dies mid-send leaves them to another. Every delivery
attempt is a row of ``alert_attempts``.
"""

from __future__ import annotations

import uuid

from nissa_server.schemas import AlertDelivery, AlertInfo
from nissa_server.store.conn import Conn

ALERTS_SCHEMA = """
CREATE TABLE alerts (
    alert_id TEXT PRIMARY KEY,
    run_key {key} NOT NULL,
    rule TEXT NOT NULL,
    condition TEXT NOT NULL,
    subject TEXT NOT NULL,
    rank INTEGER,
    step {key},
    open_key TEXT UNIQUE,
    status TEXT NOT NULL,
    message TEXT NOT NULL,
    fired_at {real} NOT NULL,
    seen_at {real} NOT NULL,
    resolved_at {real},
    command_id TEXT
);
CREATE INDEX alerts_run ON alerts (run_key, fired_at);
CREATE INDEX alerts_fired ON alerts (fired_at);
CREATE TABLE alert_notices (
    notice_id TEXT PRIMARY KEY,
    alert_id TEXT NOT NULL,
    destination TEXT NOT NULL,
    state TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at {real} NOT NULL,
    claimed_until {real},
    created_at {real} NOT NULL,
    sent_at {real},
    last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX alert_notices_due ON alert_notices (status, next_at);
CREATE INDEX alert_notices_alert ON alert_notices (alert_id);
CREATE TABLE alert_attempts (
    notice_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    alert_id TEXT NOT NULL,
    destination TEXT NOT NULL,
    ts {real} NOT NULL,
    ok INTEGER NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (notice_id, attempt)
);
CREATE INDEX alert_attempts_alert ON alert_attempts (alert_id)
"""
"""Their step of ``store.migrations`` (``{key}``, ``{real}``: each backend's spelling)."""

ALERT_COLUMNS = ("a.alert_id, r.run_id, r.name, a.rule, a.condition, a.subject, a.rank, a.step, a.status, a.message,"
                 " a.fired_at, a.seen_at, a.resolved_at, a.command_id")


def open_key(rule: str, run_key: int, subject: str) -> str:
    return f"{rule}\x1f{run_key}\x1f{subject}"


def open_alert(conn: Conn, *, run_key: int, rule: str, condition: str, subject: str, rank: int | None,
               step: int | None, message: str, now: float, destinations: list[str],
               command_id: str | None = None) -> str | None:
    """Open an alert unless one is already firing for (rule, run, subject); returns its id when opened
    here (with a ``firing`` notice queued for each destination), None when it already fired."""
    alert_id = uuid.uuid4().hex
    row = conn.execute(
        "INSERT INTO alerts (alert_id, run_key, rule, condition, subject, rank, step, open_key, status, message,"
        " fired_at, seen_at, command_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (open_key) DO NOTHING"
        " RETURNING alert_id",
        (alert_id, run_key, rule, condition, subject, rank, step, open_key(rule, run_key, subject), "firing",
         message, now, now, command_id)).fetchone()
    if row is None:
        return None
    queue_notices(conn, alert_id, "firing", destinations, now)
    return alert_id


def set_command(conn: Conn, alert_id: str, command_id: str) -> None:
    conn.execute("UPDATE alerts SET command_id = ? WHERE alert_id = ?", (command_id, alert_id))


def touch_alert(conn: Conn, rule: str, run_key: int, subject: str, now: float) -> None:
    """The condition of a firing alert was seen again (a new matching anomaly): it lasts."""
    conn.execute("UPDATE alerts SET seen_at = ? WHERE open_key = ?", (now, open_key(rule, run_key, subject)))


def resolve_alert(conn: Conn, alert_id: str, now: float, destinations: list[str]) -> bool:
    """Resolve a firing alert (once, whichever server); a ``resolved`` notice is queued for each destination."""
    row = conn.execute("UPDATE alerts SET status = 'resolved', resolved_at = ?, open_key = NULL"
                       " WHERE alert_id = ? AND status = 'firing' RETURNING alert_id", (now, alert_id)).fetchone()
    if row is None:
        return False
    queue_notices(conn, alert_id, "resolved", destinations, now)
    return True


def queue_notices(conn: Conn, alert_id: str, state: str, destinations: list[str], now: float) -> None:
    conn.executemany(
        "INSERT INTO alert_notices (notice_id, alert_id, destination, state, status, next_at, created_at)"
        " VALUES (?,?,?,?,?,?,?)",
        [(uuid.uuid4().hex, alert_id, d, state, "pending", now, now) for d in destinations])


# --- reading --------------------------------------------------------------------------------------


def firing(conn: Conn) -> list[tuple]:
    """(alert id, run key, rule, subject, rank, step, seen_at, run status) of every firing alert."""
    return conn.execute(
        "SELECT a.alert_id, a.run_key, a.rule, a.subject, a.rank, a.step, a.seen_at, r.status FROM alerts a"
        " JOIN runs r USING (run_key) WHERE a.status = 'firing'").fetchall()


_FIELDS = ("alert_id", "run_id", "run_name", "rule", "condition", "subject", "rank", "step", "status", "message",
           "fired_at", "seen_at", "resolved_at", "command_id")


def _row(row: tuple) -> AlertInfo:
    return AlertInfo(**dict(zip(_FIELDS, row, strict=True)))


def list_alerts(conn: Conn, *, run_key: int | None = None, status: str | None = None, limit: int = 100
                ) -> list[AlertInfo]:
    where: list[str] = []
    args: list[object] = []
    if run_key is not None:
        where.append("a.run_key = ?")
        args.append(run_key)
    if status is not None:
        where.append("a.status = ?")
        args.append(status)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return [_row(r) for r in conn.execute(
        f"SELECT {ALERT_COLUMNS} FROM alerts a JOIN runs r USING (run_key){clause}"
        " ORDER BY a.fired_at DESC, a.alert_id LIMIT ?", (*args, limit)).fetchall()]


def get_alert(conn: Conn, alert_id: str) -> AlertInfo | None:
    row = conn.execute(f"SELECT {ALERT_COLUMNS} FROM alerts a JOIN runs r USING (run_key) WHERE a.alert_id = ?",
                       (alert_id,)).fetchone()
    return None if row is None else _row(row)


def with_deliveries(conn: Conn, alerts: list[AlertInfo]) -> list[AlertInfo]:
    """The alerts with each one's notifications, oldest first."""
    sent = _deliveries(conn, [a.alert_id for a in alerts])
    for alert in alerts:
        alert.deliveries = [AlertDelivery(**d) for d in sent[alert.alert_id]]
    return alerts


def _deliveries(conn: Conn, alert_ids: list[str]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {a: [] for a in alert_ids}
    if not alert_ids:
        return out
    marks = ",".join("?" * len(alert_ids))
    for alert_id, destination, state, status, attempts, last_error, sent_at in conn.execute(
            f"SELECT alert_id, destination, state, status, attempts, last_error, sent_at FROM alert_notices"
            f" WHERE alert_id IN ({marks}) ORDER BY created_at, notice_id", alert_ids).fetchall():
        out[alert_id].append({"destination": destination, "state": state, "status": status, "attempts": attempts,
                              "last_error": last_error, "sent_at": sent_at})
    return out


def alerts_by_status(conn: Conn) -> dict[str, int]:
    """Alerts stored by status (firing, resolved), for /metrics."""
    return {status: n for status, n in conn.execute("SELECT status, COUNT(*) FROM alerts GROUP BY status")}


# --- delivering -----------------------------------------------------------------------------------


def claim_due(conn: Conn, now: float, claim_s: float, destinations: list[str], limit: int = 20) -> list[tuple]:
    """Claim notices to ``destinations`` due now (unclaimed, or claimed by a server that never finished):
    (notice id, alert id, destination, state, attempts) each, now claimed for ``claim_s``."""
    marks = ",".join("?" * len(destinations))
    rows = conn.execute(
        f"SELECT notice_id FROM alert_notices WHERE status = 'pending' AND next_at <= ?"
        f" AND (claimed_until IS NULL OR claimed_until < ?) AND destination IN ({marks})"
        # A "resolved" waits for its "firing" to the same destination: never the end before the news.
        f" AND NOT (state = 'resolved' AND EXISTS (SELECT 1 FROM alert_notices f WHERE f.alert_id ="
        f" alert_notices.alert_id AND f.destination = alert_notices.destination AND f.state = 'firing'"
        f" AND f.status = 'pending'))"
        f" ORDER BY next_at LIMIT ?{conn.for_update}", (now, now, *destinations, limit)).fetchall()
    claimed = []
    for (notice_id,) in rows:
        row = conn.execute(
            "UPDATE alert_notices SET claimed_until = ? WHERE notice_id = ? AND status = 'pending'"
            " AND (claimed_until IS NULL OR claimed_until < ?) RETURNING notice_id, alert_id, destination, state,"
            " attempts", (now + claim_s, notice_id, now)).fetchone()
        if row is not None:
            claimed.append(tuple(row))
    return claimed


def record_attempt(conn: Conn, notice_id: str, alert_id: str, destination: str, attempt: int, now: float, ok: bool,
                   error: str, next_at: float | None) -> None:
    """One delivery attempt: sent; or failed and retried at ``next_at``; or failed for good (None)."""
    conn.execute("INSERT INTO alert_attempts (notice_id, attempt, alert_id, destination, ts, ok, error)"
                 " VALUES (?,?,?,?,?,?,?)", (notice_id, attempt, alert_id, destination, now, int(ok), error[:500]))
    status = "sent" if ok else ("pending" if next_at is not None else "failed")
    conn.execute("UPDATE alert_notices SET status = ?, attempts = ?, next_at = ?, claimed_until = NULL,"
                 " sent_at = ?, last_error = ? WHERE notice_id = ?",
                 (status, attempt, next_at if next_at is not None else now, now if ok else None, error[:500],
                  notice_id))


def postpone(conn: Conn, notice_id: str, until: float) -> None:
    """A rate limit holds the notice back (not an attempt)."""
    conn.execute("UPDATE alert_notices SET next_at = ?, claimed_until = NULL WHERE notice_id = ?", (until, notice_id))


def delete_run_alerts(conn: Conn, run_key: int) -> None:
    ids = [r[0] for r in conn.execute("SELECT alert_id FROM alerts WHERE run_key = ?", (run_key,)).fetchall()]
    for alert_id in ids:
        conn.execute("DELETE FROM alert_attempts WHERE alert_id = ?", (alert_id,))
        conn.execute("DELETE FROM alert_notices WHERE alert_id = ?", (alert_id,))
    conn.execute("DELETE FROM alerts WHERE run_key = ?", (run_key,))
