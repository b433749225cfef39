"""Where a run streams, remembered in its run directory: a resumed run goes on streaming there.

Every rank writes ``<run dir>/server`` when it starts (the ``--server`` it was given, or an empty line
for none); ``esper-train --resume`` without ``--server`` reads it back. A run written before this file
existed has its server in the config of its ``run_started`` event, the first line of its log.
"""

from __future__ import annotations

import json
import logging
import pathlib

from trainer.checkpoint.files import CheckpointError, open_regular

logger = logging.getLogger(__name__)

SERVER_FILE = "server"
_MAX_BYTES = 1 << 16


def remember_server(run_dir: pathlib.Path, server: str | None) -> None:
    """Record where this run streams (None: nowhere); a directory that cannot take it is only a warning."""
    try:
        (run_dir / SERVER_FILE).write_text((server or "") + "\n", encoding="utf-8")
    except OSError as err:
        logger.warning("cannot record the run's server in %s: %s", run_dir, err)


def streaming_line(server: str | None, before: bool, log_path: pathlib.Path, run_dir: pathlib.Path) -> tuple[str, bool]:
    """What a run says at its start about its server (and whether to stderr): where a resumed run streams
    when it took the server from before; with none, where its events go and how to send them later."""
    if server is None:
        return (f"esper-train: no --server: the run is only logged, to {log_path}; send it to a server with: "
                f"esper-train upload {run_dir} --server URL"), True
    if before:
        return f"streaming to {server} as before (--server URL for another, --server '' for none)", False
    return f"streaming to {server}", False


def previous_server(run_dir: pathlib.Path) -> str | None:
    """The server the run streamed to when it last ran (None: none, or unknown)."""
    recorded = _bounded(run_dir / SERVER_FILE)
    if recorded is not None:
        return recorded.decode("utf-8", errors="replace").strip() or None
    first = (_bounded(run_dir / "events.jsonl", 1 << 20) or b"").split(b"\n", 1)[0]
    try:
        event = json.loads(first)
        server = event["payload"]["config"]["server"] if event.get("kind") == "run_started" else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return server if isinstance(server, str) and server else None


def _bounded(path: pathlib.Path, limit: int = _MAX_BYTES) -> bytes | None:
    """Up to ``limit`` bytes of a regular file (None: absent, or not a regular file)."""
    try:
        with open_regular(path, path.parent.name) as f:
            return f.read(limit)
    except (FileNotFoundError, CheckpointError):
        return None
    except OSError as err:
        logger.warning("cannot read %s: %s", path, err)
        return None
