"""Late upload: send a finished run's local log to a server, idempotently, then its profile traces and
stack files (``stacks`` answers, watchdog dumps).

The same sender as a live run: hello, the server's welcome says what it already holds,
only the rest is sent, and the server de-duplicates on (run_id, rank, seq) anyway. A server
that does not answer is reported at once (or waited for, ``wait_s``), not retried for the
whole timeout.
"""

from __future__ import annotations

import logging
import pathlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from leyline import Command, RunStarted
from leyline.payloads import MAX_NAME_CHARS
from nissa.hub.config import HubConfig
from nissa.hub.rest import wait_for_server
from nissa.hub.runlog import LogFile
from nissa.hub.secret import run_secret
from nissa.hub.sender import Sender
from nissa.hub.stats import HubStats
from nissa.hub.traces import TraceUpload, logged_traces, stack_dumps, upload_traces

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadResult:
    """One log file's upload."""

    path: pathlib.Path
    run_id: str
    rank: int
    events: int
    """Events in the log."""
    sent: int
    """Events sent by this upload (0 when the server already had them all)."""
    stored: int
    """Highest seq the server confirmed; ``stored == events`` means complete."""
    error: str | None = None
    traces: TraceUpload | None = None
    """The log's profile traces, once its events are all stored (None before)."""

    @property
    def complete(self) -> bool:
        return self.stored >= self.events and not (self.traces and self.traces.errors)


def run_logs(run_dir: pathlib.Path) -> list[pathlib.Path]:
    """The log files of a run directory (one per rank)."""
    return sorted(pathlib.Path(run_dir).glob("events*.jsonl"))


def _ignore_command(command: Command) -> None:
    logger.info("ignoring command %s sent to a run being uploaded", command.command_id)


def upload_log(path: pathlib.Path, server: str, token: str | None, timeout: float) -> UploadResult:
    """Send one log until the server has stored all of it, or ``timeout`` passes."""
    log = LogFile(path)
    name = log.first.payload.name if isinstance(log.first.payload, RunStarted) else ""
    config = HubConfig(run_id=log.run_id, log_dir=path.parent.parent, server=server, token=token,
                       rank=log.rank, name=name[:MAX_NAME_CHARS])
    try:
        secret = run_secret(path.parent)  # a run logged before stream secrets gets one now
    except OSError as err:
        raise ValueError(f"{path.parent}: cannot create the run's stream secret: {err.strerror}") from None
    stats = HubStats(logged=log.committed[0])
    sender = Sender(config, log, stats, threading.Condition(), _ignore_command, secret=secret, upload=True,
                    give_up_when_refused=True)
    sender.start()
    try:
        deadline = time.monotonic() + timeout
        while not sender.wait_acked(log.committed[0], 0.2) and sender.refused is None:
            if time.monotonic() >= deadline:
                break
    finally:
        sender.stop(timeout=2.0)
    return UploadResult(path=path, run_id=log.run_id, rank=log.rank, events=log.committed[0], sent=stats.sent,
                        stored=stats.acked, error=stats.last_error if stats.acked < log.committed[0] else None)


def upload_run(run_dir: pathlib.Path, server: str, token: str | None = None, timeout: float = 60.0,
               wait_s: float = 0.0, on_wait: Callable[[str], None] | None = None) -> list[UploadResult]:
    """Upload every rank's log of ``run_dir``, then its profile traces.

    FileNotFoundError when it holds no log; ``rest.ServerUnavailable`` when no nissa-server answers
    at ``server`` within ``wait_s`` seconds (0: one quick try; ``on_wait`` hears why it waits).
    """
    if not pathlib.Path(run_dir).is_dir():
        raise FileNotFoundError(f"no events to upload: {run_dir} is not a directory (a run's is <log_dir>/<run_id>)")
    logs = run_logs(run_dir)
    if not logs:
        raise FileNotFoundError(f"no events*.jsonl in {run_dir} (a run's directory, <log_dir>/<run_id>, holds them)")
    wait_for_server(server, wait_s, on_wait)
    results = []
    for path in logs:
        result = upload_log(path, server, token, timeout)
        if result.stored >= result.events:  # the run exists on the server: its traces can follow
            found = logged_traces(path, pathlib.Path(run_dir)) + stack_dumps(pathlib.Path(run_dir), result.rank)
            traces = upload_traces(found, server, result.run_id, token, secret=run_secret(path.parent))
            result = replace(result, traces=traces)
        results.append(result)
    return results
