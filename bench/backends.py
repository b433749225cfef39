"""The stores a benchmark compares side by side: an SQLite file, or a PostgreSQL that pgserver starts for it."""

from __future__ import annotations

import pathlib
import warnings
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
