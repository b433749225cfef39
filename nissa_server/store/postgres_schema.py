"""PostgreSQL schema and migrations. The same tables and meaning as the SQLite file (see
``sqlite_schema``), in PostgreSQL's types; the version lives in ``nissa_schema``. Servers starting at
the same time migrate one after the other (an advisory lock), in one transaction."""

from __future__ import annotations

import logging
from collections.abc import Callable

import psycopg

from nissa_server.store import histograms_sql, run_meta_sql, summaries_sql
from nissa_server.store.alerts_sql import ALERTS_SCHEMA
from nissa_server.store.blocks import regroup
from nissa_server.store.history import DELETED_RUNS_SCHEMA
from nissa_server.store.model import UnusableDatabase, migration_line
from nissa_server.store.ranks_sql import RANKS_SCHEMA
from nissa_server.store.series_sql import schema_sql
from nissa_server.store.sql import INDEXED_KIND_SET, INDEXED_KINDS_SQL

logger = logging.getLogger(__name__)
MIGRATION_LOCK = 0x6E69_7373_6101
"""Advisory lock key held while a server migrates (any number that no other user of the database takes)."""


def _v1(conn: psycopg.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE runs (
            run_key BIGINT PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'live',
            created_at DOUBLE PRECISION NOT NULL,
            started_at DOUBLE PRECISION,
            ended_at DOUBLE PRECISION,
            last_seen_at DOUBLE PRECISION NOT NULL,
            last_step BIGINT NOT NULL DEFAULT 0,
            last_epoch BIGINT NOT NULL DEFAULT 0,
            config BYTEA,
            finish BYTEA,
            hub_health BYTEA,
            secret_hash BYTEA
        );
        -- id is the global commit order and the watch cursor (handed out under the counter's row lock).
        CREATE TABLE events (
            id BIGINT PRIMARY KEY,
            run_key BIGINT NOT NULL,
            rank INTEGER NOT NULL,
            seq BIGINT NOT NULL,
            kind TEXT NOT NULL,
            severity SMALLINT NOT NULL,
            ts DOUBLE PRECISION NOT NULL,
            body BYTEA NOT NULL
        );
        CREATE UNIQUE INDEX events_stream ON events (run_key, rank, seq);
        CREATE INDEX events_kind ON events (run_key, kind, seq);
        CREATE INDEX events_run ON events (run_key, id);
        CREATE TABLE streams (
            run_key BIGINT NOT NULL,
            rank INTEGER NOT NULL,
            last_seq BIGINT NOT NULL,
            contiguous BIGINT NOT NULL,
            bytes BIGINT NOT NULL DEFAULT 0,
            session TEXT,
            held_until DOUBLE PRECISION,
            PRIMARY KEY (run_key, rank)
        );
        CREATE TABLE kind_counts (
            run_key BIGINT NOT NULL,
            kind TEXT NOT NULL,
            n BIGINT NOT NULL,
            PRIMARY KEY (run_key, kind)
        );
        CREATE TABLE commands (
            command_id TEXT PRIMARY KEY,
            run_key BIGINT NOT NULL,
            action TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            request BYTEA NOT NULL,
            applied_step BIGINT,
            result BYTEA,
            message TEXT NOT NULL DEFAULT '',
            history BYTEA NOT NULL,
            idempotency_key TEXT UNIQUE
        );
        CREATE INDEX commands_run ON commands (run_key, status);
        CREATE TABLE artifacts (
            run_key BIGINT NOT NULL,
            name TEXT NOT NULL,
            size BIGINT NOT NULL,
            sha256 TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (run_key, name)
        );
        CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
        INSERT INTO counters VALUES ('event_id', 0), ('run_key', 0);
        """
    )


def _v2(conn: psycopg.Connection) -> None:
    # As SQLite's v5: only the rare kinds are indexed by kind (``indexed`` in ``leyline.kinds``).
    conn.execute("DROP INDEX events_kind")
    conn.execute(f"CREATE INDEX events_kind ON events (run_key, kind, seq) WHERE {INDEXED_KINDS_SQL}")


def _v3(conn: psycopg.Connection) -> None:
    # As SQLite's v6: ranks of a run, their state, and each rank's status of each command.
    for statement in RANKS_SCHEMA.format(key="BIGINT", real="DOUBLE PRECISION", blob="BYTEA", rowid="").split(";"):
        if statement.strip():
            conn.execute(statement)


def _v4(conn: psycopg.Connection) -> None:
    # As SQLite's v7: events in blocks (see store.blocks), the rare kinds once more, a row each.
    conn.execute(
        """
        -- id is the block's first event id: its events have ids id .. id + n - 1 and seqs seq .. seq + n - 1.
        CREATE TABLE event_blocks (
            id BIGINT PRIMARY KEY,
            run_key BIGINT NOT NULL,
            rank INTEGER NOT NULL,
            seq BIGINT NOT NULL,
            n INTEGER NOT NULL,
            body BYTEA NOT NULL
        );
        CREATE UNIQUE INDEX event_blocks_stream ON event_blocks (run_key, rank, seq);
        CREATE INDEX event_blocks_run ON event_blocks (run_key, id);
        CREATE TABLE rare_events (
            run_key BIGINT NOT NULL,
            kind TEXT NOT NULL,
            seq BIGINT NOT NULL,
            rank INTEGER NOT NULL,
            id BIGINT NOT NULL,
            severity SMALLINT NOT NULL,
            body BYTEA NOT NULL,
            PRIMARY KEY (run_key, kind, seq, rank)
        );
        """
    )
    with conn.cursor(name="nissa_regroup") as rows, conn.cursor() as out:
        rows.execute("SELECT id, run_key, rank, seq, kind, severity, body FROM events ORDER BY run_key, rank, seq")
        for block, rare in regroup(iter(rows), INDEXED_KIND_SET):
            out.execute("INSERT INTO event_blocks (id, run_key, rank, seq, n, body) VALUES (%s,%s,%s,%s,%s,%s)",
                        block)
            if rare:
                out.executemany("INSERT INTO rare_events (run_key, kind, seq, rank, id, severity, body)"
                                " VALUES (%s,%s,%s,%s,%s,%s,%s)", rare)
    conn.execute("DROP TABLE events")


def _v5(conn: psycopg.Connection) -> None:
    # As SQLite's v8: deleted runs are remembered.
    conn.execute(DELETED_RUNS_SCHEMA.format(real="DOUBLE PRECISION"))


def _v6(conn: psycopg.Connection) -> None:
    # As SQLite's v9: alerts, their notifications and every delivery attempt (see store.alerts_sql).
    for statement in ALERTS_SCHEMA.format(key="BIGINT", real="DOUBLE PRECISION", rowid="").split(";"):
        if statement.strip():
            conn.execute(statement)


def _v7(conn: psycopg.Connection) -> None:
    # As SQLite's v10: project, group, tags, notes, config entries, summaries (copied at the next open).
    types = {"key": "BIGINT", "real": "DOUBLE PRECISION", "rowid": ""}
    for script in (run_meta_sql.SCHEMA, summaries_sql.SCHEMA):
        for statement in script.format(**types).split(";"):
            if statement.strip():
                conn.execute(statement)


_V8_COVERING = """
    DROP INDEX run_params_num;
    DROP INDEX run_params_text;
    CREATE INDEX run_params_num ON run_params (key, num, run_key);
    CREATE INDEX run_params_text ON run_params (key, text, run_key);
    CREATE INDEX run_params_key ON run_params (key, run_key) INCLUDE (num, text);
    ALTER TABLE run_metrics DROP CONSTRAINT run_metrics_pkey,
        ADD CONSTRAINT run_metrics_pkey PRIMARY KEY (key, run_key) INCLUDE (count, min, max, last, step, best);
    DROP INDEX runs_project;
    DROP INDEX runs_group;
    CREATE INDEX runs_project ON runs (project, created_at, run_key);
    CREATE INDEX runs_group ON runs (run_group, created_at, run_key);
    CREATE STATISTICS run_params_key_text (mcv) ON key, text FROM run_params;
    CREATE STATISTICS run_params_key_num (mcv) ON key, num FROM run_params
"""


def _v8(conn: psycopg.Connection) -> None:
    # The runs page's filters and sorts answered from indexes alone, as SQLite's are: there a secondary index
    # holds the primary key and a WITHOUT ROWID table's rows lie in key order, here an index holds neither. A
    # filter on a config entry or a metric, a sort by one, an ILIKE over project or group then reads a key's
    # entries in one stretch of an index, not a row of the heap per run (rows written a run at a time, so one
    # key's rows lie on every page of the table). And the statistics of a config value with its key: a value
    # belongs to a few keys (``true`` to ``amp``, not to ``lr``), which the planner, multiplying each column's
    # own, would estimate tens of times too few runs for, and join them one at a time.
    for statement in _V8_COVERING.split(";"):
        if statement.strip():
            conn.execute(statement)


# Append only: migration N takes a database from version N-1 to N.
MIGRATIONS: tuple[Callable[[psycopg.Connection], None], ...] = (_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8)
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: psycopg.Connection) -> int:
    found = conn.execute("SELECT to_regclass('nissa_schema')").fetchone()
    if found is None or found[0] is None:
        return 0
    row = conn.execute("SELECT version FROM nissa_schema").fetchone()
    return 0 if row is None else int(row[0])


def migrate(conn: psycopg.Connection) -> int:
    """Bring the database to ``SCHEMA_VERSION`` in one transaction; refuse a newer one."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        current = schema_version(conn)
        if current > SCHEMA_VERSION:
            raise UnusableDatabase(f"database schema v{current} is newer than this nissa-server "
                                   f"(v{SCHEMA_VERSION}); upgrade the server")
        if current == 0:
            conn.execute("CREATE TABLE nissa_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO nissa_schema VALUES (0)")
        if current < SCHEMA_VERSION:  # one line, not one per migration
            logger.info("%s", migration_line(current, SCHEMA_VERSION))
        for version in range(current + 1, SCHEMA_VERSION + 1):
            logger.debug("migrating database to schema v%d", version)
            MIGRATIONS[version - 1](conn)
            conn.execute("UPDATE nissa_schema SET version = %s", (version,))
    return SCHEMA_VERSION


def create_series_tables(conn: psycopg.Connection) -> None:
    """The series tables (``store.series_sql``), beside the versioned schema, under the migration lock."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(schema_sql("BYTEA", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"))
        conn.execute(histograms_sql.schema_sql())
        # Packed floats do not compress: storing them as they are spares a compression attempt per write.
        for column in ("step", "epoch", "round", "ts", "value"):
            conn.execute(f"ALTER TABLE series_chunks ALTER COLUMN {column} SET STORAGE EXTERNAL")


def backfill_lab(conn: psycopg.Connection) -> None:
    """What was stored before summaries and config rows existed, copied there (once, under the migration lock)."""
    from nissa_server.store.postgres import PgConn

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        summaries_sql.backfill_once(PgConn(conn))
