"""``GET /runs``: a page of runs, filtered and sorted (``leyline.query``, ``runs_query``), each as a bounded
summary (the full config is on ``GET /runs/{id}``), so that listing many runs with huge configs stays small;
what a page's runs have in other tables is read a table at a time, not a run at a time."""

from __future__ import annotations

from typing import Any

import msgspec

from leyline import RunStarted
from leyline.payloads import Scalar
from leyline.query import Clause, SortKey
from leyline.run_keys import shown_metrics
from leyline.runs import RunSummary
from leyline.summaries import MetricSummary
from nissa_server.store import run_meta_sql, summaries_sql
from nissa_server.store.conn import Conn
from nissa_server.store.runs_query import Compiled, compile_query, metric_keys
from nissa_server.store.series_queries import in_snapshot

MAX_PARAMS = 64
"""Config entries a run of a page carries at most."""
MAX_METRICS = 256
"""Series summaries one run of a page carries at most (besides those its query and sort name)."""
MAX_CHARS = 80
"""Characters of a config key or string value (or host, device) in a run of a page; longer ones are cut."""
COLUMNS = ("run_key, run_id, name, status, created_at, started_at, ended_at, last_seen_at, last_step, last_epoch,"
           " config, finish, world_size, status_detail, project, run_group, notes")
"""What ``summary_fields`` reads of a ``runs`` row, in its order."""

_started = msgspec.json.Decoder(RunStarted)


def _cut(text: str | None) -> str | None:
    return text if text is None or len(text) <= MAX_CHARS else text[:MAX_CHARS - 1] + "…"


def _config(config: dict[str, Scalar]) -> dict[str, Scalar]:
    out: dict[str, Scalar] = {}
    for key, value in config.items():
        if len(out) >= MAX_PARAMS:
            break
        out[_cut(key) or ""] = _cut(value) if isinstance(value, str) else value
    return out


@in_snapshot
def page_runs(conn: Conn, limit: int, offset: int, clauses: list[Clause], sort: list[SortKey], now: float,
              here: str, metrics: list[str] | None = None) -> tuple[int, list[RunSummary]]:
    """(runs matching ``clauses``, the page of them from ``offset`` in ``sort`` order, then newest first);
    ``connected`` says whether a server other than ``here`` holds one of a run's streams (the caller knows its
    own). Each run carries the summaries of ``metrics`` (series keys), or of its first ``MAX_METRICS`` series
    by key, its values set outright (``run.summary``) and those the query and the sort name. Its reads see one
    commit."""
    total, keys = _page_keys(conn, compile_query(clauses, sort, conn.ilike), limit, offset)
    found_rows = {int(row[0]): row for row in conn.execute(
        f"SELECT {COLUMNS} FROM runs WHERE run_key IN ({','.join('?' * len(keys))})", keys).fetchall()} if keys else {}
    rows = [found_rows[k] for k in keys if k in found_rows]
    keys = [int(row[0]) for row in rows]
    details = PageDetails(conn, keys, now, here)
    if metrics is None:
        found = summaries_sql.read(conn, keys, per_run=MAX_METRICS)
        if any(len(f) >= MAX_METRICS for f in found.values()):  # cut: what a table needs whatever the cut
            for more in (summaries_sql.read(conn, keys, pinned=True),
                         summaries_sql.read(conn, keys, metric_keys(clauses, sort))):
                for key in keys:
                    found[key].update(more[key])
    else:
        found = summaries_sql.read(conn, keys, metrics)
    return total, [RunSummary(**summary_fields(row, details, found[int(row[0])])) for row in rows]


def _page_keys(conn: Conn, q: Compiled, limit: int, offset: int) -> tuple[int, list[int]]:
    """(runs matching, the page's run keys in order): keys only, so that a sort carries no run's config. The
    joins are on unique keys: a run is one row whatever it joins."""
    if not q.where:  # every run: counted from an index, and a page in created order read from one, not sorted
        found = conn.execute(f"SELECT r.run_key FROM runs r {' '.join(q.joins)} ORDER BY {q.order_sql} LIMIT ?"
                             " OFFSET ?", (*q.join_args, limit, offset)).fetchall()
        return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]), [int(r[0]) for r in found]
    # A filter: the matches and their sort keys found once (materialised, so that PostgreSQL plans it for every
    # match rather than for a LIMIT's first rows, which a count over all of them never allows), then counted
    # and the page sorted out of them.
    found = conn.execute(
        f"WITH m AS MATERIALIZED (SELECT {q.sort_columns} FROM runs r {' '.join(q.joins)}{q.where_sql})"
        f" SELECT o{len(q.order) - 1}, (SELECT COUNT(*) FROM m) FROM m ORDER BY {q.order_by_columns} LIMIT ?"
        " OFFSET ?", (*q.join_args, *q.where_args, limit, offset)).fetchall()
    if not found:  # none, or none as far as the offset
        return int(conn.execute(f"SELECT COUNT(*) FROM runs r{q.where_sql}", q.where_args).fetchone()[0]), []
    return int(found[0][1]), [int(r[0]) for r in found]


class PageDetails:
    """What a page's runs have in other tables, read in one query per table (not per run)."""

    def __init__(self, conn: Conn, keys: list[int], now: float, here: str) -> None:
        self.last_seq: dict[int, dict[str, int]] = {k: {} for k in keys}
        self.stored: dict[int, int] = dict.fromkeys(keys, 0)
        self.held: dict[int, set[int]] = {k: set() for k in keys}
        """The ranks of each run whose stream a server other than ``here`` holds."""
        self.counts: dict[int, dict[str, int]] = {k: {} for k in keys}
        self.tags = run_meta_sql.tags_of(conn, keys)
        if not keys:
            return
        among = f"run_key IN ({','.join('?' * len(keys))})"
        for key, rank, seq, nbytes, session, until in conn.execute(
                f"SELECT run_key, rank, last_seq, bytes, session, held_until FROM streams WHERE {among}",
                keys).fetchall():
            self.last_seq[key][str(rank)] = seq
            self.stored[key] += nbytes
            if until is not None and until >= now and session is not None and not session.startswith(here):
                self.held[key].add(rank)
        for key, size in conn.execute(f"SELECT run_key, SUM(size) FROM artifacts WHERE {among} GROUP BY run_key",
                                      keys).fetchall():
            self.stored[key] += int(size)
        for key, kind, n in conn.execute(f"SELECT run_key, kind, n FROM kind_counts WHERE {among} ORDER BY kind",
                                         keys).fetchall():
            self.counts[key][kind] = n


def summary_fields(row: tuple, details: PageDetails, metrics: dict[str, MetricSummary],
                   whole: bool = False) -> dict[str, Any]:
    """A ``runs`` row (``COLUMNS``) as ``RunSummary``'s fields; ``whole``: the config and texts not cut."""
    (key, run_id, name, status, created, started, ended, seen, step, epoch, config, finish, world, why, project,
     group, notes) = row
    start = _started.decode(config) if config else None
    cut = (lambda text: text) if whole else _cut
    return {
        "run_id": run_id, "name": name, "status": status, "connected": bool(details.held[key]), "created_at": created,
        "started_at": started, "ended_at": ended, "last_seen_at": seen,
        "duration_s": None if started is None else max(0.0, (ended if ended is not None else seen) - started),
        "world_size": world, "last_step": step, "last_epoch": epoch, "last_seq": details.last_seq[key],
        "counts": details.counts[key], "stored_bytes": details.stored[key], "status_detail": cut(why),
        "host": cut(start.host) if start else None, "device": cut(start.device) if start else None,
        "config": (start.config if whole else _config(start.config)) if start else {},
        "project": project, "group": group, "tags": details.tags[key], "notes": notes,
        "metrics": shown_metrics(metrics, world),
    }
