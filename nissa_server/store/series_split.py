"""A pass of many series written in parts: a transaction per ``SERIES_PER_PART`` series, the writer free between them.

A run that logs a hundred thousand names once makes a pass of as many series: written in one transaction, it held
SQLite's single writer (every trainer's acks) for seconds. Such a pass writes its series a part at a time; the
watermark moves only with the last part, which writes the markers and the values set outright, and ends the pass.

While it is in progress ``series_progress`` says up to which event the pass charts (``PENDING``: its end) and
``series_pending`` lists the series a part has written. What a reader sees meanwhile is exact, never half of
anything: a written series' rows hold its points up to that end, so a read leaves those points out of what it
charts itself from the events past the watermark (``tail``); a series not written yet is charted from the events as
before; a run's summaries are each exact up to the watermark or up to that end. A pass that stops halfway
(kill -9, an error, a server gone) is finished by the next pass: its own writer's at once, another's (on a shared
database, or after a restart) once no part was written for ``STALE_S`` (timed by its own clock from when it first saw
the last part's stamp: two servers' clocks may be apart). That pass charts the same events again, writes only the
series not listed, and ends it; refused if a part was written meanwhile (the stamp is read again under the lock); a
part of the writer it took over from is refused from then on (``OWNER``; each part locks the watermark's row), so
each series is written once.
"""

from __future__ import annotations

from collections.abc import Iterable

from nissa_server.store.conn import Conn, insert_many
from nissa_server.store.series_gather import Charted, chart, joined_steps

SERIES_PER_PART = 5000
"""Series one transaction of a pass writes at most, on SQLite (``Store.series_per_part``)."""
PG_SERIES_PER_PART = 50_000
"""On PostgreSQL, where the pass writes on a connection of its own beside ingest's transactions (parts bound how long
it holds the watermark's row, which merges on other servers wait for)."""
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


OWNER = 5
"""The ``series_progress`` row of the writer writing the pass in parts (its ``SeriesWriter.token``)."""
TOUCHED = 6
"""The ``series_progress`` row of when its last part was written (unix milliseconds, stamped as the part ends)."""
STALE_S = 10.0
"""A pass in parts with no part written for this long is finished by another pass (its writer died or is stuck): before,
only its own writer writes its parts, which need not look for series written already."""


def pending_end(conn: Conn) -> int:
    """Up to which event id a pass in parts charts (0: none in progress)."""
    return state(conn)[0]


def state(conn: Conn) -> tuple[int, int, float]:
    """(up to which event id a pass in parts charts (0: none in progress), its writer's token, when its last part was
    written (unix seconds))."""
    found = {int(r[0]): int(r[1]) for r in conn.execute(
        "SELECT id, upto FROM series_progress WHERE id IN (?, ?, ?)", (PENDING, OWNER, TOUCHED))}
    return found.get(PENDING, 0), found.get(OWNER, 0), found.get(TOUCHED, 0) / 1000


def claim(conn: Conn, end: int, token: int, now: float) -> None:
    """A pass in parts up to ``end`` is written by the writer ``token`` (in each part's transaction: begun, taken
    over, or going on)."""
    conn.executemany("INSERT INTO series_progress (id, upto) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET upto = "
                     "excluded.upto", [(PENDING, end), (OWNER, token), (TOUCHED, int(now * 1000))])


def written(conn: Conn, runs: Iterable[int]) -> set[tuple[int, str]]:
    """Of the series of ``runs``, those a part of the pass in progress has written (run key, key)."""
    found: set[tuple[int, str]] = set()
    for run_key in runs:
        found.update((run_key, r[0]) for r in conn.execute("SELECT key FROM series_pending WHERE run_key = ?",
                                                            (run_key,)))
    return found


def note(conn: Conn, series: list[tuple[int, str]]) -> None:
    """``series`` (run key, key) written by a part of the pass in progress."""
    if series:
        insert_many(conn, "INSERT INTO series_pending (run_key, key) VALUES (?, ?) ON CONFLICT DO NOTHING", series)


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
