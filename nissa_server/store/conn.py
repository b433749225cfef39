"""The connection both backends hand to the SQL they share: a DB-API subset with ``?`` placeholders."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """``sqlite3.Connection`` as it is, or a PostgreSQL connection behind an adapter."""

    for_update: str
    """`` FOR UPDATE`` where rows are locked so (PostgreSQL); empty where one writer holds the file."""
    greatest: str
    """The larger of two values: ``GREATEST`` (PostgreSQL), the two-argument ``MAX`` (SQLite)."""
    snapshot: str
    ilike: str
    """A LIKE that ignores case: ``ILIKE`` (PostgreSQL, whose statistics then estimate it), SQLite's own ``LIKE``
    (ASCII, as its ``LOWER``)."""
    """Begins a read-only transaction whose reads all see the same commits (``COMMIT`` ends it)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Cursor: ...
    def executemany(self, sql: str, params: Any, /) -> Any: ...
