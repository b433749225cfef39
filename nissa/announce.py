"""The line a run's start prints (rank 0's), as W&B's ``View run at …``: the run's id and where to watch it.

Library code logs: the line goes to the ``nissa.announce`` logger at INFO. Where the program configured no
logging at all (a plain script), that logger (and only it: the library's other loggers stay quiet) gets a
handler of its own on stderr, once, so the line is seen; a program that configured logging decides itself
(its handlers, its levels)."""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger(__name__)


class _Line(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"nissa: {record.getMessage()}"


def _seen() -> None:
    """A stderr handler on this logger where no logging is configured anywhere above it."""
    if logger.hasHandlers():
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Line())
    logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


def announce(run_id: str, server: str | None, log_path: object) -> None:
    """``nissa: run <id>: <server>/ui#run=<id>`` (its local log where it streams to no server)."""
    _seen()
    if server:
        first = server.split(",")[0].rstrip("/")
        logger.info("run %s: %s/ui#run=%s (console: esper-watch --server %s --run %s)", run_id, first, run_id,
                    first, run_id)
    else:
        logger.info("run %s: logged to %s only (nissa upload sends it to a server)", run_id, log_path)
