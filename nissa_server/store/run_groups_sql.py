"""The runs a query finds, as grouping reads them: each run's value of the key (its group, its project or
one config entry) and of the metric columns asked for, a query per metric, over the indexes ``GET /runs``
uses (``runs_query``), never a run's config or a point of a series."""

from __future__ import annotations

from leyline.payloads import Scalar
from leyline.query import Clause
from nissa_server.store.conn import Conn
from nissa_server.store.runs_query import compile_query

STATS = frozenset({"last", "min", "max", "best", "count", "step"})
_KEY_COLUMNS = {"group": "r.run_group", "project": "r.project"}


def _value(num: float | None, text: str | None) -> Scalar:
    if num is not None:
        return int(num) if num.is_integer() and abs(num) < 2**53 else num
    return text or None


def members(conn: Conn, clauses: list[Clause], by: str, metrics: list[tuple[str, str]],
            limit: int) -> tuple[int, list[tuple[str, Scalar, dict[tuple[str, str], float | None]]]]:
    """(runs matching ``clauses``, the newest ``limit`` of them as ``(run_id, value of by, {(series key, stat):
    value})``); ``by`` is ``group``, ``project`` or ``config.KEY``; each stat one of ``STATS``."""
    q = compile_query(clauses, [])
    total = int(conn.execute(f"SELECT COUNT(*) FROM runs r{q.where_sql}", q.where_args).fetchone()[0])
    if by in _KEY_COLUMNS:
        select, join, join_args = f"{_KEY_COLUMNS[by]}, NULL", "", []
    else:
        select, join, join_args = "g.num, g.text", " LEFT JOIN run_params g ON g.run_key = r.run_key AND g.key = ?", [
            by[len("config."):]]
    rows = conn.execute(f"SELECT r.run_key, r.run_id, {select} FROM runs r{join}{q.where_sql}"
                        " ORDER BY r.created_at DESC, r.run_key DESC LIMIT ?", (*join_args, *q.where_args, limit))
    runs: dict[int, tuple[str, Scalar, dict[tuple[str, str], float | None]]] = {}
    for key, run_id, first, second in rows.fetchall():
        value = first or None if by in _KEY_COLUMNS else _value(first, second)
        runs[int(key)] = (run_id, value, {})
    where = " AND ".join(["m.key = ?", *q.where])
    for series, stat in metrics:
        if stat not in STATS:
            raise ValueError(f"no statistic {stat!r}")
        for key, value in conn.execute(f"SELECT m.run_key, m.{stat} FROM run_metrics m JOIN runs r ON r.run_key ="
                                       f" m.run_key WHERE {where}", (series, *q.where_args)).fetchall():
            if int(key) in runs:
                runs[int(key)][2][(series, stat)] = value
    return total, list(runs.values())
