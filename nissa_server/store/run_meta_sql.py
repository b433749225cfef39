"""What organises a lab's runs: project, group, tags, notes (from ``run_started``, edited by ``PATCH
/runs/{id}``), and the config a row per entry (``run_params``), so that a filter or a sort on a config key
reads an index rather than every run's config."""

from __future__ import annotations

import math

import msgspec

from leyline.payloads import ConfigUpdated, RunStarted
from nissa_server.store.conn import Conn

SCHEMA = """
    ALTER TABLE runs ADD COLUMN project TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN run_group TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
    CREATE INDEX runs_created ON runs (created_at, run_key);
    CREATE INDEX runs_project ON runs (project, created_at);
    CREATE INDEX runs_group ON runs (run_group, created_at);
    CREATE TABLE run_tags (
        run_key {key} NOT NULL,
        tag TEXT NOT NULL,
        pos INTEGER NOT NULL,
        PRIMARY KEY (run_key, tag)
    ){rowid};
    CREATE INDEX run_tags_tag ON run_tags (tag, run_key);
    CREATE TABLE run_params (
        run_key {key} NOT NULL,
        key TEXT NOT NULL,
        num {real},
        text TEXT,
        PRIMARY KEY (run_key, key)
    ){rowid};
    CREATE INDEX run_params_num ON run_params (key, num);
    CREATE INDEX run_params_text ON run_params (key, text)
"""
"""The migration that brings them (the same on both stores)."""

_started = msgspec.json.Decoder(RunStarted)
_encoder = msgspec.json.Encoder()

MAX_PARAM_CHARS = 256
"""Characters of a config key or text value that filters and sorts see. An index entry has a size limit
(PostgreSQL's btree: about 2.7 kB), and a config may hold a long string (a prompt, a path): the run keeps
its whole config (``GET /runs/{id}``), its rows here the first 256 characters of a value, and keys longer
than that are not filterable at all."""


def param_row(run_key: int, key: str, value: str | int | float | bool) -> tuple[int, str, float | None, str | None]:
    """A config entry as ``run_params`` keeps it: a number in ``num``, anything else as text (``true``, ``false``;
    None is neither)."""
    if isinstance(value, bool):
        return run_key, key, None, "true" if value else "false"
    if isinstance(value, (int, float)):
        number = float(value)
        return run_key, key, (None if math.isnan(number) else number), None
    return run_key, key, None, value[:MAX_PARAM_CHARS]


def started(conn: Conn, run_key: int, payload: RunStarted) -> None:
    """Rank 0's ``run_started``: the run's project, group, tags, notes and config entries."""
    conn.execute("UPDATE runs SET project = ?, run_group = ?, notes = ? WHERE run_key = ?",
                 (payload.project, payload.group, payload.notes, run_key))
    set_tags(conn, run_key, list(payload.tags))
    conn.execute("DELETE FROM run_params WHERE run_key = ?", (run_key,))
    rows = [param_row(run_key, k, v) for k, v in payload.config.items()
            if v is not None and len(k) <= MAX_PARAM_CHARS]
    if rows:
        conn.executemany("INSERT INTO run_params (run_key, key, num, text) VALUES (?,?,?,?)", rows)


def config_updated(conn: Conn, run_key: int, payload: ConfigUpdated) -> None:
    """Rank 0's ``config`` event: its entries over the run's config (``GET /runs/{id}``) and its filterable
    entries (``config.lr>=…``), a run's config that grows as it goes."""
    row = conn.execute("SELECT config FROM runs WHERE run_key = ?", (run_key,)).fetchone()
    if row is not None and row[0]:
        start = _started.decode(row[0])
        grown = msgspec.structs.replace(start, config={**start.config, **payload.config})
        conn.execute("UPDATE runs SET config = ? WHERE run_key = ?", (_encoder.encode(grown), run_key))
    keys = [k for k in payload.config if len(k) <= MAX_PARAM_CHARS]
    conn.executemany("DELETE FROM run_params WHERE run_key = ? AND key = ?", [(run_key, k) for k in keys])
    rows = [param_row(run_key, k, v) for k in keys if (v := payload.config[k]) is not None]
    if rows:
        conn.executemany("INSERT INTO run_params (run_key, key, num, text) VALUES (?,?,?,?)", rows)


def set_tags(conn: Conn, run_key: int, tags: list[str]) -> None:
    conn.execute("DELETE FROM run_tags WHERE run_key = ?", (run_key,))
    unique = list(dict.fromkeys(tags))
    if unique:
        conn.executemany("INSERT INTO run_tags (run_key, tag, pos) VALUES (?,?,?)",
                         [(run_key, tag, i) for i, tag in enumerate(unique)])


def patch(conn: Conn, run_key: int, tags: list[str] | None, notes: str | None, group: str | None,
          project: str | None) -> bool:
    """Change what was given; False where the run is gone."""
    if conn.execute(f"SELECT run_key FROM runs WHERE run_key = ?{conn.for_update}", (run_key,)).fetchone() is None:
        return False
    for column, value in (("notes", notes), ("run_group", group), ("project", project)):
        if value is not None:
            conn.execute(f"UPDATE runs SET {column} = ? WHERE run_key = ?", (value, run_key))
    if tags is not None:
        set_tags(conn, run_key, tags)
    return True


def delete_run(conn: Conn, run_key: int) -> None:
    conn.execute("DELETE FROM run_tags WHERE run_key = ?", (run_key,))
    conn.execute("DELETE FROM run_params WHERE run_key = ?", (run_key,))


def tags_of(conn: Conn, run_keys: list[int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {k: [] for k in run_keys}
    if run_keys:
        for run_key, tag in conn.execute(
                f"SELECT run_key, tag FROM run_tags WHERE run_key IN ({','.join('?' * len(run_keys))})"
                " ORDER BY run_key, pos", run_keys).fetchall():
            out[int(run_key)].append(tag)
    return out


def backfill(conn: Conn) -> int:
    """Config entries, project, group, tags and notes of the runs stored before they had rows of their own
    (once per database). Returns the runs read."""
    runs = conn.execute("SELECT run_key, config FROM runs WHERE config IS NOT NULL").fetchall()
    for run_key, config in runs:
        try:
            payload = _started.decode(bytes(config))
        except msgspec.DecodeError:
            continue
        started(conn, int(run_key), payload)
    return len(runs)
