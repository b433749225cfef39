"""The run filter language (``leyline.query``) compiled to SQL for both stores: every value a parameter,
every column and operator from the lists below (never a word of the query's own).

A metric clause reads the run's summary row (``run_metrics``, indexed by series key and best), a config
clause its config entry (``run_params``), a tag clause ``run_tags``: each an ``IN (subquery)`` that an index
answers, so a page of a lab's runs never reads a config or a point of a series.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from leyline.query import Clause, Field, SortKey

_COLUMNS = {"project": "r.project", "group": "r.run_group", "name": "r.name", "notes": "r.notes", "id": "r.run_id",
            "status": "r.status", "started": "r.started_at", "created": "r.created_at", "ended": "r.ended_at",
            "step": "r.last_step", "epoch": "r.last_epoch"}
_STATS = {"last": "last", "min": "min", "max": "max", "best": "best", "count": "count", "step": "step"}
_SQL_OPS = {"=": "=", "!=": "=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
"""``!=`` is ``=`` negated (a run without the value matches it)."""


@dataclass
class Compiled:
    """SQL fragments and their parameters, in the order they appear in ``SELECT … FROM runs r {joins} WHERE
    {where} ORDER BY {order}``."""

    joins: list[str] = field(default_factory=list)
    join_args: list = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    where_args: list = field(default_factory=list)
    order: list[tuple[str, str]] = field(default_factory=list)
    """(expression, `` DESC`` and/or `` NULLS LAST`` or nothing) of each sort key, the last the run key."""

    @property
    def where_sql(self) -> str:
        return (" WHERE " + " AND ".join(self.where)) if self.where else ""

    @property
    def order_sql(self) -> str:
        return ", ".join(f"{expression}{way}" for expression, way in self.order)

    @property
    def sort_columns(self) -> str:
        """The sort keys as columns ``o0``, ``o1``… (the last the run key), to sort a query's result by them."""
        return ", ".join(f"{expression} AS o{i}" for i, (expression, _) in enumerate(self.order))

    @property
    def order_by_columns(self) -> str:
        return ", ".join(f"o{i}{way}" for i, (_, way) in enumerate(self.order))


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _text(column: str, op: str, values: tuple, args: list, ilike: str) -> str:
    if op == "~":
        args.append(_like(str(values[0])))
        return f"{column} {ilike} ? ESCAPE '\\'"
    args.extend(values)
    return f"{column} IN ({','.join('?' * len(values))})" if len(values) > 1 else f"{column} = ?"


def _condition(clause: Clause, args: list, ilike: str) -> str:
    f, op, values = clause.field, clause.op, clause.values
    if f.kind == "attr" and f.name == "tag":
        return f"r.run_key IN (SELECT run_key FROM run_tags WHERE {_text('tag', op, values, args, ilike)})"
    if f.kind == "attr":
        column = _COLUMNS[f.name]
        if isinstance(values[0], float):
            args.append(values[0])
            return f"{column} {_SQL_OPS[op]} ?"
        return _text(column, op, values, args, ilike)
    if f.kind == "metric":
        args += [f.name, values[0]]
        return f"r.run_key IN (SELECT run_key FROM run_metrics WHERE key = ? AND {_STATS[f.stat]} {_SQL_OPS[op]} ?)"
    args.append(f.name)
    if isinstance(values[0], float):
        args.append(values[0])
        test = f"num {_SQL_OPS[op]} ?"
    elif op == "~":
        test = _text("text", op, values, args, ilike)
    else:
        test = _config_equal(values, args)
    return f"r.run_key IN (SELECT run_key FROM run_params WHERE key = ? AND {test})"


def _config_equal(values: tuple, args: list) -> str:
    """A config entry equal to one of ``values``: as a number where the value reads as one, else as text."""
    tests = []
    for value in values:
        try:
            number = float(value)
        except ValueError:
            number = None
        if number is not None and not math.isnan(number):
            tests.append("num = ?")
            args.append(number)
        else:
            tests.append("text = ?")
            args.append(value)
    return "(" + " OR ".join(tests) + ")"


def _sort(key: SortKey, i: int, out: Compiled) -> None:
    f, way = key.field, " DESC" if key.descending else ""
    if f.kind == "attr":
        first_tag = "(SELECT MIN(tag) FROM run_tags t WHERE t.run_key = r.run_key)"
        column = first_tag if f.name == "tag" else _COLUMNS[f.name]
        out.order.append((column, f"{way} NULLS LAST"))
    elif f.kind == "metric":
        out.joins.append(f"LEFT JOIN run_metrics s{i} ON s{i}.run_key = r.run_key AND s{i}.key = ?")
        out.join_args.append(f.name)
        out.order.append((f"s{i}.{_STATS[f.stat]}", f"{way} NULLS LAST"))
    else:
        out.joins.append(f"LEFT JOIN run_params s{i} ON s{i}.run_key = r.run_key AND s{i}.key = ?")
        out.join_args.append(f.name)
        out.order += [(f"s{i}.num", f"{way} NULLS LAST"), (f"s{i}.text", f"{way} NULLS LAST")]


def compile_query(clauses: list[Clause], sort: list[SortKey], ilike: str = "LIKE") -> Compiled:
    """``clauses`` (all must hold) and ``sort`` (then newest first) as SQL over ``runs r``; ``ilike``: the store's
    LIKE that ignores case (``Conn.ilike``)."""
    out = Compiled()
    for clause in clauses:
        condition = _condition(clause, out.where_args, ilike)
        out.where.append(f"NOT ({condition})" if clause.negated != (clause.op == "!=") else condition)
    for i, key in enumerate(sort):
        _sort(key, i, out)
    out.order += [("r.created_at", " DESC"), ("r.run_key", " DESC")]
    return out


def metric_keys(clauses: list[Clause], sort: list[SortKey]) -> list[str]:
    """The series keys a query and a sort name (a page shows their summaries whatever else it leaves out)."""
    fields: list[Field] = [c.field for c in clauses] + [k.field for k in sort]
    return list(dict.fromkeys(f.name for f in fields if f.kind == "metric"))
