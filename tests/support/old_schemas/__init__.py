"""Databases as older servers left them: the DDL each migration ran before the two stores shared one list
(``sqlite.sql``: SQLite's ten, ``postgresql.sql``: PostgreSQL's eight, numbered its own way), kept as it was
so that a test builds a database at any earlier version without today's code."""

from __future__ import annotations

import functools
import pathlib
import re
import sqlite3

import psycopg

HERE = pathlib.Path(__file__).parent


@functools.cache
def steps(store: str) -> tuple[tuple[str, ...], ...]:
    """The statements of each old version of ``store`` (``sqlite`` or ``postgresql``), version 1 first."""
    text = (HERE / f"{store}.sql").read_text()
    sections = re.split(r"^-- version \d+\n", text, flags=re.MULTILINE)[1:]
    return tuple(tuple(s.strip() for s in section.split(";\n") if s.strip() and not s.startswith("--"))
                 for section in sections)


def sqlite_at(path: pathlib.Path, version: int) -> sqlite3.Connection:
    """A SQLite file as an older server left it at ``version`` (its ``PRAGMA user_version``)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for section in steps("sqlite")[:version]:
        for statement in section:
            conn.execute(statement.rstrip(";"))
    conn.execute(f"PRAGMA user_version={version}")
    return conn


def postgresql_at(conn: psycopg.Connection, version: int) -> None:
    """The (blank) database of ``conn`` as an older server left it at ``version`` (its ``nissa_schema``)."""
    for section in steps("postgresql")[:version]:
        for statement in section:
            conn.execute(statement.rstrip(";"))  # type: ignore[call-overload]
    conn.execute("CREATE TABLE nissa_schema (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO nissa_schema VALUES (%s)", (version,))
