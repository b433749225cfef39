"""The store: one interface (``Store``), two backends chosen once at start-up from ``--db``: a SQLite
file (the embedded default) or a PostgreSQL database that several servers share."""

from __future__ import annotations

import pathlib
from typing import Any

from nissa_server.store.base import Published, Store
from nissa_server.store.model import Committed, EventWrite, RunGone, StaleWrite, Superseded, UnusableDatabase

__all__ = ["Committed", "EventWrite", "Published", "RunGone", "StaleWrite", "Store", "Superseded", "UnusableDatabase",
           "create_store", "is_database_url"]

URL_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(db: str | pathlib.Path) -> bool:
    """A PostgreSQL connection URL rather than the path of a SQLite file."""
    return isinstance(db, str) and db.startswith(URL_SCHEMES)


def create_store(db: str | pathlib.Path, **kwargs: Any) -> Store:
    """The store for ``db``: a PostgreSQL URL, or the path of a SQLite file."""
    if is_database_url(db):
        from nissa_server.store.postgres import PostgresStore  # only a PostgreSQL store needs its driver

        return PostgresStore(str(db), **kwargs)
    from nissa_server.store.sqlite import SqliteStore

    return SqliteStore(pathlib.Path(db), **kwargs)
