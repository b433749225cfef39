"""The stores a benchmark compares side by side: an SQLite file, or a PostgreSQL that pgserver starts for it."""

from __future__ import annotations

import pathlib
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any


def database(backend: str, root: pathlib.Path) -> tuple[str, Any]:
    """``--db`` for ``backend`` under ``root``, and the PostgreSQL server to clean up (None for SQLite).
    Raises ImportError where pgserver is not installed."""
    if backend == "sqlite":
        return str(root / "bench.db"), None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs on an unset XDG_RUNTIME_DIR
        import pgserver

        pg = pgserver.get_server(root / "pg", cleanup_mode="stop")
    return pg.get_uri(), pg


def each_database(backends: str) -> Iterator[tuple[str, str]]:
    """(backend, ``--db``) for each of the comma-separated ``backends``, each in a fresh temporary folder that
    lasts while the caller's loop body runs (its PostgreSQL stopped after); one that cannot run here is
    said and skipped."""
    for backend in backends.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                db, pg = database(backend, pathlib.Path(tmp))
            except ImportError as err:
                print(f"{backend:>10}: unavailable ({err})", flush=True)
                continue
            try:
                yield backend, db
            finally:
                if pg is not None:
                    pg.cleanup()
