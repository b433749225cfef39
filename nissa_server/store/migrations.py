"""The schema's history, one list for both stores: migration N takes a database from version N-1 to N,
on SQLite and on PostgreSQL alike. A step is SQL written once over the types each database spells its own
way (``Dialect``), and sometimes a data step after it. Append only; a new table or index is a new step here.

Each store keeps its version its own way and runs the list in its own transactions (``sqlite_schema``,
``postgres_schema``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from nissa_server.store import run_meta_sql, summaries_sql, sweeps_sql
from nissa_server.store.alerts_sql import ALERTS_SCHEMA
from nissa_server.store.blocks import regroup
from nissa_server.store.conn import Executor
from nissa_server.store.history import DELETED_RUNS_SCHEMA
from nissa_server.store.ranks_sql import RANKS_SCHEMA
from nissa_server.store.sql import INDEXED_KIND_SET, INDEXED_KINDS_SQL, insert_rare


@dataclass(frozen=True)
class Dialect:
    """How one database spells what the schema's templates leave open."""

    name: str
    key: str
    """A 64-bit integer (run keys, event ids, steps)."""
    real: str
    """A double."""
    blob: str
    """Bytes."""
    small: str
    """A small integer (a severity)."""
    rowid: str
    """What follows a table whose rows lie in primary key order (SQLite's `` WITHOUT ROWID``)."""
    by_id: str
    """What an index on ``run_key`` adds to list a run's events in id order: nothing on SQLite (every index ends
    with the rowid, which ``id`` is), ``, id`` on PostgreSQL."""
    rows: Callable[[Executor, str], Iterable[tuple]] = field(repr=False)
    """Every row of a query, read a batch at a time (a migration may read a whole table)."""

    def spell(self, template: str) -> str:
        return template.format(key=self.key, real=self.real, blob=self.blob, small=self.small, rowid=self.rowid,
                               by_id=self.by_id)


@dataclass(frozen=True)
class Migration:
    """One step of the schema: ``sql`` (a template, statements split on ``;``), then ``data``."""

    sql: str
    data: Callable[[Executor, Dialect], None] | None = None
    only: str | None = None
    """The one dialect the step is for (the other's schema already has what it brings)."""

    def apply(self, conn: Executor, dialect: Dialect) -> None:
        if self.only not in (None, dialect.name):
            return
        for statement in statements(dialect.spell(self.sql)):
            conn.execute(statement)
        if self.data is not None:
            self.data(conn, dialect)


def statements(script: str) -> Iterator[str]:
    """A script's statements, one at a time (not SQLite's executescript: it commits first, and a migration
    is one transaction)."""
    return (s for s in script.split(";") if s.strip())


_BASE = """
    CREATE TABLE runs (
        run_key {key} PRIMARY KEY,
        run_id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'live',
        created_at {real} NOT NULL,
        started_at {real},
        ended_at {real},
        last_seen_at {real} NOT NULL,
        last_step {key} NOT NULL DEFAULT 0,
        last_epoch {key} NOT NULL DEFAULT 0,
        config {blob},
        finish {blob},
        hub_health {blob}
    );
    -- id is the global ingest order and the watch cursor.
    CREATE TABLE events (
        id {key} PRIMARY KEY,
        run_key {key} NOT NULL,
        rank INTEGER NOT NULL,
        seq {key} NOT NULL,
        kind TEXT NOT NULL,
        severity {small} NOT NULL,
        ts {real} NOT NULL,
        body {blob} NOT NULL
    );
    CREATE UNIQUE INDEX events_stream ON events (run_key, rank, seq);
    CREATE INDEX events_kind ON events (run_key, kind, seq);
    CREATE TABLE streams (
        run_key {key} NOT NULL,
        rank INTEGER NOT NULL,
        last_seq {key} NOT NULL,
        contiguous {key} NOT NULL,
        PRIMARY KEY (run_key, rank)
    ){rowid};
    CREATE TABLE kind_counts (
        run_key {key} NOT NULL,
        kind TEXT NOT NULL,
        n {key} NOT NULL,
        PRIMARY KEY (run_key, kind)
    ){rowid};
    CREATE TABLE commands (
        command_id TEXT PRIMARY KEY,
        run_key {key} NOT NULL,
        action TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at {real} NOT NULL,
        updated_at {real} NOT NULL,
        request {blob} NOT NULL,
        applied_step {key},
        result {blob},
        message TEXT NOT NULL DEFAULT '',
        history {blob} NOT NULL,
        idempotency_key TEXT UNIQUE
    );
    CREATE INDEX commands_run ON commands (run_key, status);
    CREATE TABLE artifacts (
        run_key {key} NOT NULL,
        name TEXT NOT NULL,
        size {key} NOT NULL,
        sha256 TEXT NOT NULL,
        created_at {real} NOT NULL,
        PRIMARY KEY (run_key, name)
    ){rowid}
"""

# Several sessions (and servers, on PostgreSQL) meet at a stream: the one that holds it (the fence its writes
# check) and until when; the bytes its events take; counters that never hand a key or an event id out twice,
# even once the rows that had the highest are deleted.
_STREAMS_HELD = """
    ALTER TABLE streams ADD COLUMN bytes {key} NOT NULL DEFAULT 0;
    ALTER TABLE streams ADD COLUMN session TEXT;
    ALTER TABLE streams ADD COLUMN held_until {real};
    UPDATE streams SET bytes = (SELECT COALESCE(SUM(length(body)), 0) FROM events e
                                WHERE e.run_key = streams.run_key AND e.rank = streams.rank);
    CREATE TABLE counters (name TEXT PRIMARY KEY, value {key} NOT NULL){rowid};
    INSERT INTO counters VALUES ('event_id', (SELECT COALESCE(MAX(id), 0) FROM events)),
                                ('run_key', (SELECT COALESCE(MAX(run_key), 0) FROM runs))
"""

_BLOCKS = """
    -- id is the block's first event id: its events have ids id .. id + n - 1 and seqs seq .. seq + n - 1.
    CREATE TABLE event_blocks (
        id {key} PRIMARY KEY,
        run_key {key} NOT NULL,
        rank INTEGER NOT NULL,
        seq {key} NOT NULL,
        n INTEGER NOT NULL,
        body {blob} NOT NULL
    );
    CREATE UNIQUE INDEX event_blocks_stream ON event_blocks (run_key, rank, seq);
    CREATE INDEX event_blocks_run ON event_blocks (run_key{by_id});
    CREATE TABLE rare_events (
        run_key {key} NOT NULL,
        kind TEXT NOT NULL,
        seq {key} NOT NULL,
        rank INTEGER NOT NULL,
        id {key} NOT NULL,
        severity {small} NOT NULL,
        body {blob} NOT NULL,
        PRIMARY KEY (run_key, kind, seq, rank)
    )
"""


def _regroup(conn: Executor, dialect: Dialect) -> None:
    # The events stored so far, one row each, as blocks (see store.blocks).
    rows = dialect.rows(conn, "SELECT id, run_key, rank, seq, kind, severity, body FROM events"
                              " ORDER BY run_key, rank, seq")
    for block, rare in regroup(iter(rows), INDEXED_KIND_SET):
        conn.execute("INSERT INTO event_blocks (id, run_key, rank, seq, n, body) VALUES (?,?,?,?,?,?)", block)
        if rare:
            insert_rare(conn, rare)
    conn.execute("DROP TABLE events")


# The runs page's filters and sorts answered from indexes alone. SQLite's are already: a secondary index holds
# the primary key and a WITHOUT ROWID table's rows lie in key order. A PostgreSQL index holds neither: a filter
# on a config entry or a metric, a sort by one, an ILIKE over project or group then reads a key's entries in one
# stretch of an index, not a row of the heap per run (rows written a run at a time, so one key's rows lie on
# every page of the table). And the statistics of a config value with its key: a value belongs to a few keys
# (``true`` to ``amp``, not to ``lr``), which the planner, multiplying each column's own, would estimate tens
# of times too few runs for, and join them one at a time.
_COVERING = """
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

MIGRATIONS: tuple[Migration, ...] = (
    Migration(_BASE),  # 1
    # 2: watch replay of one run walks its events in id order.
    Migration("CREATE INDEX events_run ON events (run_key{by_id})"),
    # 3: SHA-256 of the run's stream secret; NULL for a run stored before streams had one (the first
    # connection that presents a secret binds it, see nissa_server.ingest).
    Migration("ALTER TABLE runs ADD COLUMN secret_hash {blob}"),
    Migration(_STREAMS_HELD),  # 4
    # 5: only the rare kinds are indexed by kind (``indexed`` in ``leyline.kinds``): a metric event stored
    # updates one B-tree less.
    Migration(f"DROP INDEX events_kind; CREATE INDEX events_kind ON events (run_key, kind, seq)"
              f" WHERE {INDEXED_KINDS_SQL}"),
    # 6: runs of several ranks (torchrun): how many ranks, why the status is what it is (the rank named), the
    # state of each rank, and each rank's status of each command (see store.ranks_sql).
    Migration(RANKS_SCHEMA),
    # 7: events in blocks (see store.blocks): a row per write of a stream, not per event, and the rare kinds
    # once more, a row each, for the queries by kind.
    Migration(_BLOCKS, data=_regroup),
    # 8: deleted runs are remembered: their streams are refused, their ids never claimed again.
    Migration(DELETED_RUNS_SCHEMA),
    # 9: alerts, their notifications and every delivery attempt (see store.alerts_sql).
    Migration(ALERTS_SCHEMA),
    # 10: a lab's runs: project, group, tags, notes, config entries a row each, every series summarised (see
    # store.run_meta_sql and store.summaries_sql; what was stored before is copied there at the next open).
    Migration(run_meta_sql.SCHEMA + ";" + summaries_sql.SCHEMA),
    Migration(_COVERING, only="postgresql"),  # 11
    # 12: sweeps, their trials, the metric each trial reported, PBT's exploits (see store.sweeps_sql).
    Migration(sweeps_sql.SCHEMA),
)
SCHEMA_VERSION = len(MIGRATIONS)


def build(conn: Executor, dialect: Dialect, upto: int = SCHEMA_VERSION, since: int = 0) -> None:
    """Apply migrations ``since + 1`` .. ``upto`` (the caller holds the transaction and records the version)."""
    for migration in MIGRATIONS[since:upto]:
        migration.apply(conn, dialect)
