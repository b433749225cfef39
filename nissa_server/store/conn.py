"""The connection both backends hand to the SQL they share: a DB-API subset with ``?`` placeholders."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Executor(Protocol):
    """What runs SQL: any DB-API connection (a migration's plain ``sqlite3.Connection`` too)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Cursor: ...
    def executemany(self, sql: str, params: Any, /) -> Any: ...


class Conn(Executor, Protocol):
    """``sqlite3.Connection`` as it is, or a PostgreSQL connection behind an adapter."""

    for_update: str
    """`` FOR UPDATE`` where rows are locked so (PostgreSQL); empty where one writer holds the file."""
    greatest: str
    """The larger of two values: ``GREATEST`` (PostgreSQL), the two-argument ``MAX`` (SQLite)."""
    snapshot: str
    """Begins a read-only transaction whose reads all see the same commits (``COMMIT`` ends it)."""
    ilike: str
    """A LIKE that ignores case: ``ILIKE`` (PostgreSQL, whose statistics then estimate it), SQLite's own ``LIKE``
    (ASCII, as its ``LOWER``)."""


def insert_many(conn: Executor, query: str, rows: Sequence[Sequence[Any]]) -> None:
    """``conn.executemany`` of an ``INSERT … VALUES (?, …)``, as the connection does it fastest (PostgreSQL: many rows a
    statement, ``PgConn.insert_rows``). No two rows may meet on the key of an ``ON CONFLICT … DO UPDATE``."""
    insert_rows = getattr(conn, "insert_rows", None)
    if insert_rows is None:
        conn.executemany(query, rows)
    else:
        insert_rows(query, rows)
