"""The one language that finds runs (``GET /runs?q=…&sort=…``, the console, the web page), parsed here.

    project:cifar tag:baseline status:finished,lost name~sweep config.lr>=0.01 val_loss<0.5 val_loss.min<0.4

A query is clauses separated by blanks, all of which a run must match: ``field op value``, ``-`` in front
negates one (``-tag:broken``), a bare word is ``name~word``. Operators: ``:`` and ``=`` (equal; a comma
separates alternatives: ``status:live,lost``), ``!=``, ``~`` (contains, any case), ``<``, ``<=``, ``>``,
``>=``. A field is one of ``ATTRIBUTES``, ``config.<key>`` (a nested key as ``config.a.b``) or a metric: a
series key with an optional statistic, ``val_loss``, ``val_loss.min``, ``acc{env=2}.last`` (no statistic:
``best``; no ``rank`` label: rank 0's (``leyline.run_keys``: a run of one rank shows its series without one, a
run of several ``val_loss{rank=1}``); ``{}`` ends a
name whose last part is itself a statistic's name). A field or a value with blanks or operator characters
is written in double quotes (``\\`` escapes a quote); a quoted value is one value, commas and all (``quote``
writes any value so that it reads back as itself). A sort is fields separated by commas, ``-`` in front
for descending (``-val_loss.best,name``).

``parse`` and ``parse_sort`` return the clauses (the AST a store compiles to SQL with parameters) or raise
``QueryError`` naming the position (0-based, in characters) of the mistake.
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass

from leyline.enums import RunStatus
from leyline.run_keys import stored_labels
from leyline.series import format_key, parse_key
from leyline.summaries import STATS

MAX_QUERY_CHARS = 2000
MAX_CLAUSES = 32
MAX_SORT_KEYS = 4
TEXT_ATTRIBUTES: frozenset[str] = frozenset({"project", "group", "name", "notes", "id", "tag", "status"})
NUMBER_ATTRIBUTES: frozenset[str] = frozenset({"started", "created", "ended", "step", "epoch"})
"""``started``, ``created``, ``ended``: unix seconds or an ISO date (``2026-11-27``, ``2026-11-27T10:00``,
UTC unless it says); ``step``, ``epoch``: the run's last."""
ATTRIBUTES: frozenset[str] = TEXT_ATTRIBUTES | NUMBER_ATTRIBUTES
OPERATORS: tuple[str, ...] = ("!=", "<=", ">=", ":", "=", "~", "<", ">")
_COMPARE = frozenset({"<", "<=", ">", ">="})
_STOP = set(" \t\n:=~<>!\"")


class QueryError(ValueError):
    """A mistake in a query or a sort, at ``position``."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"position {position}: {message}")
        self.position = position
        self.reason = message


@dataclass(frozen=True)
class Field:
    """What a clause or a sort reads: ``kind`` is ``attr`` (``name`` one of ``ATTRIBUTES``), ``config``
    (``name`` the flattened key) or ``metric`` (``name`` the series key, ``stat`` one of ``STATS``)."""

    kind: str
    name: str
    stat: str = "best"


@dataclass(frozen=True)
class Clause:
    field: Field
    op: str
    """``=`` (``:`` reads as ``=``), ``!=``, ``~``, ``<``, ``<=``, ``>``, ``>=``."""
    values: tuple[str | float, ...]
    """Alternatives (``=`` only has several); numbers for metrics, numeric attributes and config comparisons."""
    negated: bool = False
    position: int = 0


@dataclass(frozen=True)
class SortKey:
    field: Field
    descending: bool


def _word(text: str, at: int, stop: set[str]) -> tuple[str, int]:
    """A quoted string or a run of characters not in ``stop`` (a ``{…}`` block taken whole)."""
    if at < len(text) and text[at] == '"':
        out, i = [], at + 1
        while i < len(text):
            ch = text[i]
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                return "".join(out), i + 1
            out.append(ch)
            i += 1
        raise QueryError("a quote is not closed", at)
    i, depth = at, 0
    while i < len(text) and (depth or text[i] not in stop):
        ch = text[i]
        if ch == "\\" and depth:
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise QueryError("a '}' closes no '{'", i)
        i += 1
    if depth:
        raise QueryError("a '{' is not closed", at)
    return text[at:i], i


def field_of(name: str, position: int = 0) -> Field:
    """A field as a query names it (see the module docstring)."""
    if not name:
        raise QueryError("a field name is missing", position)
    if name in ATTRIBUTES:
        return Field("attr", name)
    if name.startswith("config."):
        if len(name) == len("config."):
            raise QueryError("config. names no key", position)
        return Field("config", name[len("config."):])
    head, stat = name, "best"
    base, dot, last = name.rpartition(".")
    if dot and base and last in STATS:
        head, stat = base, last
    try:
        series, labels = (head[:-2], {}) if head.endswith("{}") else parse_key(head)
    except ValueError as err:
        raise QueryError(str(err), position) from None
    if not series:
        raise QueryError(f"{name!r} names no series", position)
    return Field("metric", format_key(series, stored_labels(labels)), stat)


def split_fields(text: str) -> list[tuple[int, str]]:
    """A comma-separated list of fields (``val_loss.best,loss{env=0,split=val}.min``) split at the commas that
    separate fields, not those between a series' labels or inside quotes: (position, field) each, blanks left
    out."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, c in enumerate(text + ","):
        if c == '"':
            quoted = not quoted
        elif not quoted and c in "{}":
            depth = max(0, depth + (1 if c == "{" else -1))
        elif c == "," and (i == len(text) or (depth == 0 and not quoted)):
            part = text[start:i]
            if part.strip():
                parts.append((start + len(part) - len(part.lstrip()), part.strip()))
            start = i + 1
    return parts


def short_key(key: str) -> str:
    """A series key as a query may write it: without the ``rank`` label where it is 0 (``val_loss{rank=0}`` →
    ``val_loss``, ``acc{env=2,rank=0}`` → ``acc{env=2}``); ``field_of`` reads it back as the same series.
    A name whose last part is a statistic's keeps ``{}`` (``lr.min{}``)."""
    try:
        name, labels = parse_key(key)
    except ValueError:
        return key
    if labels.pop("rank", "0") != "0":
        return key
    if labels:
        return format_key(name, labels)
    return f"{name}{{}}" if name.rpartition(".")[2] in STATS and "." in name else format_key(name, labels)


def _number(text: str, position: int, field: Field) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None and field.kind == "attr" and field.name in ("started", "created", "ended"):
        try:
            when = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise QueryError(f"{field.name} takes unix seconds or an ISO date, not {text!r}", position) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.UTC)
        return when.timestamp()
    if value is None or math.isnan(value):
        raise QueryError(f"{text!r} is not a number", position)
    return value


def _clause(field: Field, op: str, raw: str, negated: bool, at: int, value_at: int, quoted: bool = False) -> Clause:
    op = "=" if op == ":" else op
    kind, name = field.kind, field.name
    numeric = kind == "metric" or (kind == "attr" and name in NUMBER_ATTRIBUTES)
    if numeric and op == "~":
        raise QueryError(f"'~' compares text; {name} is a number", at)
    if kind == "attr" and name in TEXT_ATTRIBUTES and op in _COMPARE:
        raise QueryError(f"{name} takes ':', '=', '!=' or '~', not {op!r}", at)
    alternatives = raw.split(",") if op == "=" and not numeric and not quoted else [raw]
    if name == "status" and kind == "attr":
        if op == "~":
            raise QueryError("status takes ':', '=' or '!='", at)
        for status in alternatives:
            if status not in RunStatus._value2member_map_:
                known = ", ".join(s.value for s in RunStatus)
                raise QueryError(f"unknown status {status!r} (one of {known})", value_at)
    if numeric or (kind == "config" and op in _COMPARE):
        return Clause(field, op, (_number(raw, value_at, field),), negated, at)
    return Clause(field, op, tuple(alternatives), negated, at)


_BARE = re.compile(r'[^\s"\\{},:=~<>!]+')
"""What a query may write without quotes, as a value or a field."""


def quote(value: str | float | bool) -> str:
    """A value (or a field's name) as a query writes it, so that it reads back as that one value: a boolean as
    ``true`` or ``false``, a number as Python writes it, a text bare where it can be, else in double quotes with
    ``\\`` before each ``"`` and ``\\`` (``quote("a b")`` → ``"a b"``)."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if _BARE.fullmatch(text) and not text.startswith("-"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def term(field: str, value: str | float | bool) -> str:
    """The clause that picks the runs whose ``field`` (``project``, ``group``, ``config.lr``) is ``value``."""
    return f"{quote(field)}{'=' if field.startswith('config.') else ':'}{quote(value)}"


def parse(text: str) -> list[Clause]:
    """The clauses of a query (an empty query: none); raises ``QueryError``."""
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"a query has at most {MAX_QUERY_CHARS} characters", MAX_QUERY_CHARS)
    clauses: list[Clause] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return clauses
        if len(clauses) == MAX_CLAUSES:
            raise QueryError(f"a query has at most {MAX_CLAUSES} clauses", i)
        at = i
        negated = text[i] == "-"
        i += negated
        name, i = _word(text, i, _STOP)
        op = next((o for o in OPERATORS if text.startswith(o, i)), None)
        if op is None:
            if i < len(text) and not text[i].isspace():
                raise QueryError(f"expected an operator ({' '.join(OPERATORS)}) after {name!r}", i)
            if not name:
                raise QueryError("a clause is missing", at)
            clauses.append(Clause(Field("attr", "name"), "~", (name,), negated, at))
            continue
        field = field_of(name, at + negated)
        i += len(op)
        value_at = i
        if i >= len(text) or text[i].isspace():
            raise QueryError(f"a value is missing after {name}{op}", i)
        quoted = text[i] == '"'
        raw, i = _word(text, i, {" ", "\t", "\n"})
        if i < len(text) and not text[i].isspace():
            raise QueryError("expected a blank after a value", i)
        clauses.append(_clause(field, op, raw, negated, at, value_at, quoted))


def parse_sort(text: str) -> list[SortKey]:
    """The keys of a sort, ``-`` in front for descending (an empty sort: none); raises ``QueryError``."""
    keys: list[SortKey] = []
    i = 0
    while i < len(text):
        while i < len(text) and text[i] == " ":
            i += 1
        at = i
        descending = i < len(text) and text[i] == "-"
        i += descending
        name, i = _word(text, i, {",", " "})
        keys.append(SortKey(field_of(name, at + descending), descending))
        if len(keys) > MAX_SORT_KEYS:
            raise QueryError(f"a sort has at most {MAX_SORT_KEYS} keys", at)
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text):
            if text[i] != ",":
                raise QueryError("expected ',' between sort keys", i)
            i += 1
            if i >= len(text):
                raise QueryError("a sort key is missing after ','", i)
    return keys
