"""``nissa-server``'s limit flags, and the connection cap fitted to the file descriptors the OS grants."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import resource
from typing import TypedDict

from nissa_server.cli_values import count, seconds
from nissa_server.settings import ConnectionLimits, Settings

logger = logging.getLogger(__name__)
_LIMITS = ConnectionLimits()
_SETTINGS = Settings.__dataclass_fields__
FD_RESERVE = 128
"""Descriptors kept for everything but client sockets: SQLite (a writer, a reader per thread, each
with its WAL and shared-memory files), the lock, logs, uploads in progress, the event loop's own."""


def add_limit_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("limits (what one client may hold, and for how long)")
    g.add_argument("--header-timeout", type=seconds, default=_LIMITS.header_timeout_s, metavar="SECONDS",
                   help="a connection must send a complete request head within this long (default %(default)s)")
    g.add_argument("--min-body-rate", type=count, default=_LIMITS.min_body_rate, metavar="BYTES_PER_S",
                   help="a request body must keep arriving at this rate, checked every --header-timeout "
                        "(default %(default)s)")
    g.add_argument("--max-connections", type=count, default=_LIMITS.max_connections, metavar="N",
                   help="open connections at most; at the cap a new one displaces the oldest idle one, else "
                        "gets 503 (default %(default)s, lowered to fit the open-file limit)")
    g.add_argument("--max-watchers", type=count, default=_LIMITS.max_watchers, metavar="N",
                   help="open /ws/watch connections at most; more are closed with 4429 (default %(default)s)")
    g.add_argument("--ingest-idle-timeout", type=seconds, default=_LIMITS.ingest_idle_s, metavar="SECONDS",
                   help="close an ingest connection that sends nothing for this long (default %(default)s)")
    g.add_argument("--ws-ping-interval", type=seconds, default=_LIMITS.ws_ping_interval_s, metavar="SECONDS",
                   help="websocket keep-alive ping interval (default %(default)s)")
    g.add_argument("--ws-ping-timeout", type=seconds, default=_LIMITS.ws_ping_timeout_s, metavar="SECONDS",
                   help="drop a websocket that answers no ping within this long (default %(default)s)")
    g.add_argument("--reads-per-client", type=count, default=_SETTINGS["reads_per_client"].default, metavar="N",
                   help="costly reads (runs, series, distributions, events) one client address may have in "
                        "progress or waiting; more are answered 429 with Retry-After (default %(default)s)")
    g.add_argument("--watcher-max-pending", type=count, default=_SETTINGS["watcher_max_pending"].default,
                   metavar="EVENTS", help="close a watcher this many events behind (default %(default)s)")
    g.add_argument("--watcher-max-bytes", type=count, default=_SETTINGS["watcher_max_pending_bytes"].default,
                   metavar="BYTES", help="close a watcher this many bytes behind (default %(default)s)")


class LimitFields(TypedDict):
    """The ``Settings`` fields the limit flags set."""

    limits: ConnectionLimits
    watcher_max_pending: int
    watcher_max_pending_bytes: int
    reads_per_client: int


def limit_settings(args: argparse.Namespace) -> LimitFields:
    """The ``Settings`` fields the limit flags set."""
    limits = ConnectionLimits(header_timeout_s=args.header_timeout, min_body_rate=args.min_body_rate,
                              max_connections=args.max_connections,
                              max_watchers=args.max_watchers, ingest_idle_s=args.ingest_idle_timeout,
                              ws_ping_interval_s=args.ws_ping_interval, ws_ping_timeout_s=args.ws_ping_timeout)
    return LimitFields(limits=limits, watcher_max_pending=args.watcher_max_pending,
                       watcher_max_pending_bytes=args.watcher_max_bytes, reads_per_client=args.reads_per_client)


def fit_to_open_files(settings: Settings) -> Settings:
    """Raise the open-file limit as far as the OS allows for the connection cap; if that is not enough,
    lower the cap instead: a server out of descriptors cannot even accept a health check."""
    limits = settings.limits
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = limits.max_connections + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as err:
            logger.warning("cannot raise the open-file limit to %d: %s", target, err)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return settings
    cap = max(1, soft - FD_RESERVE)
    logger.warning("open-file limit %d: at most %d connections (not %d)", soft, cap, limits.max_connections)
    return dataclasses.replace(settings, limits=dataclasses.replace(limits, max_connections=cap))
