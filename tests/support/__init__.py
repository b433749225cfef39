"""Shared test harness: real servers on loopback (in-process or as a subprocess), clients, waiting."""

from tests.support.clients import (
    SECRET,
    IngestClient,
    close_of,
    collect_watch,
    events_for,
    ingest_events,
    wait_status,
    ws_url,
)
from tests.support.server import (
    ServerUrl,
    running_server,
    start_server_process,
    stop_process,
)
from tests.support.waiting import async_wait_for, wait_for

__all__ = [
    "SECRET", "IngestClient", "ServerUrl", "close_of", "ws_url", "async_wait_for", "collect_watch", "events_for",
    "ingest_events",
    "running_server", "start_server_process", "stop_process", "wait_for", "wait_status",
]
