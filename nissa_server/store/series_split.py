"""A pass of many series written in parts: a transaction per ``SERIES_PER_PART`` series, the writer free between them.

A run that logs a hundred thousand names once makes a pass of as many series: written in one transaction, it held
SQLite's single writer (every trainer's acks) for seconds. Such a pass writes its series a part at a time; the
watermark moves only with the last part, which writes the markers and the values set outright, and ends the pass.

While it is in progress ``series_progress`` says up to which event the pass charts (``PENDING``: its end) and
``series_pending`` lists the series a part has written. What a reader sees meanwhile is exact, never half of
anything: a written series' rows hold its points up to that end, so a read leaves those points out of what it
charts itself from the events past the watermark (``tail``); a series not written yet is charted from the events as
before; a run's summaries are each exact up to the watermark or up to that end. A pass that stops halfway
(kill -9, an error, another server) is finished by the next pass, on any server: it charts the same events again,
writes only the series not listed, and ends it. Two servers finishing one pass on a shared database take turns
(each part locks the watermark's row) and each series is written once.
"""

from __future__ import annotations

from collections.abc import Iterable

from nissa_server.store.conn import Conn
from nissa_server.store.series_gather import Charted, chart, joined_steps

SERIES_PER_PART = 5000
"""Series one transaction of a pass writes at most."""
PENDING = 4
"""The ``series_progress`` row that says up to which event id a pass in parts charts (0: none in progress; row 1 is
the watermark, 2 and 3 say what was indexed once, ``series_sql.LABELS_INDEXED``, ``histograms_sql.INDEXED``)."""
SCHEMA = """
    CREATE TABLE IF NOT EXISTS series_pending (
        run_key BIGINT NOT NULL,
        key TEXT NOT NULL,
        PRIMARY KEY (run_key, key)
    );
"""
_IN = 500


def pending_end(conn: Conn) -> int:
    """Up to which event id a pass in parts charts (0: none in progress)."""
    row = conn.execute("SELECT upto FROM series_progress WHERE id = ?", (PENDING,)).fetchone()
    return 0 if row is None else int(row[0])


def begin(conn: Conn, end: int) -> None:
    """A pass in parts up to ``end`` begins (in its first part's transaction)."""
    conn.execute("INSERT INTO series_progress (id, upto) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET upto = "
                 "excluded.upto", (PENDING, end))


def written(conn: Conn, series: Iterable[tuple[int, str]]) -> set[tuple[int, str]]:
    """Of ``series`` (run key, key), those a part of the pass in progress has written."""
    by_run: dict[int, list[str]] = {}
    for run_key, key in series:
        by_run.setdefault(run_key, []).append(key)
    found: set[tuple[int, str]] = set()
    for run_key, keys in by_run.items():
        for at in range(0, len(keys), _IN):
            chunk = keys[at:at + _IN]
            found.update((run_key, r[0]) for r in conn.execute(
                f"SELECT key FROM series_pending WHERE run_key = ? AND key IN ({','.join('?' * len(chunk))})",
                (run_key, *chunk)))
    return found


def note(conn: Conn, series: list[tuple[int, str]]) -> None:
    """``series`` (run key, key) written by a part of the pass in progress."""
    if series:
        conn.executemany("INSERT INTO series_pending (run_key, key) VALUES (?, ?) ON CONFLICT DO NOTHING", series)


def end(conn: Conn) -> None:
    """The pass in parts ended (in its last part's transaction, which moves the watermark)."""
    conn.execute("UPDATE series_progress SET upto = 0 WHERE id = ?", (PENDING,))
    conn.execute("DELETE FROM series_pending")


def tail(conn: Conn, run_key: int, mark: int, blocks: list[tuple[int, bytes]]) -> Charted:
    """The points of ``blocks`` (first id, body: the run's past the watermark ``mark``, in id order) that the
    series' rows do not hold yet: a pass in progress has written some series up to its end."""
    pending = pending_end(conn)
    done = set() if pending <= mark else {r[0] for r in conn.execute(
        "SELECT key FROM series_pending WHERE run_key = ?", (run_key,))}
    if not done:
        return chart((run_key, first_id, body) for first_id, body in blocks)
    before = chart((run_key, first_id, body) for first_id, body in blocks if first_id <= pending)
    after = chart((run_key, first_id, body) for first_id, body in blocks if first_id > pending)
    before.series = {k: v for k, v in before.series.items() if k[1] not in done}
    out = Charted()
    for _ in joined_steps([before, after], out):
        pass
    return out
