"""``nissa-server``: serve the API on one address until SIGINT/SIGTERM (``nissa-server prune``: thin
old runs, see ``cli_prune``).

With ``--port 0`` the kernel picks a free port; once the server is ready, exactly one line
``nissa-server listening on http://HOST:PORT`` goes to stdout so scripts learn where it is.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import pathlib
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn, TypedDict

import uvicorn
from fastapi import FastAPI

from nissa_server.alerts.rules import AlertRules, RulesError, load_rules, with_builtin
from nissa_server.app import create_app
from nissa_server.cli_limits import add_limit_args, fit_to_open_files, limit_settings
from nissa_server.cli_values import count, port, seconds
from nissa_server.protocols import protocols
from nissa_server.settings import DEFAULT_PORT, TOKEN_ENV, Settings, default_db_path, token_from_env
from nissa_server.store import Store, UnusableDatabase, is_database_url

logger = logging.getLogger(__name__)


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _fail(message: str) -> NoReturn:
    """One line on stderr and exit status 2, as argparse does for a bad flag (without its usage text)."""
    sys.stderr.write(f"nissa-server: error: {message}\n")
    sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nissa-server",
                                description="Store, stream and steer training runs (Esper's, or any loop on "
                                            "the nissa client). (nissa-server prune --help: thin old runs' metric "
                                            "events.)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind; a non-loopback one needs a token (default 127.0.0.1)")
    p.add_argument("--port", type=port, default=DEFAULT_PORT,
                   help=f"TCP port; 0 picks a free one (default {DEFAULT_PORT})")
    add_db_arg(p)
    p.add_argument("--token", default=None, help=f"bearer token for ingest, uploads and /escalate "
                                                 f"(default: ${TOKEN_ENV})")
    p.add_argument("--read-auth", action="store_true",
                   help="require the token on reads and /ws/watch too (default: reads are open)")
    p.add_argument("--open", action="store_true",
                   help="serve without a token on purpose: any local process may delete runs (default: without a "
                        "token, DELETE is refused)")
    p.add_argument("--artifact-dir", type=pathlib.Path, default=None,
                   help="where uploaded artifacts go (default: next to the database)")
    p.add_argument("--lost-after", type=seconds, default=60.0, metavar="SECONDS",
                   help="mark a run lost after this long with no connection and no event (default 60)")
    p.add_argument("--sweep-lease", type=seconds, default=30.0, metavar="SECONDS",
                   help="a sweep's trial whose agent has not renewed its lease for this long is lost and queued "
                        "again (default 30)")
    p.add_argument("--rank-silent-after", type=seconds, default=15.0, metavar="SECONDS",
                   help="a rank of a multi-rank run silent this long marks its run degraded while others run, "
                        "failed once they have ended (default 15)")
    p.add_argument("--command-ttl", type=seconds, default=300.0, metavar="SECONDS",
                   help="expire commands still undelivered after this long (default 300)")
    p.add_argument("--stacks-answer", type=seconds, default=15.0, metavar="SECONDS",
                   help="fail a stacks command a rank has not answered after this long, naming the rank (default 15)")
    p.add_argument("--max-open-commands", type=count, default=8, metavar="N",
                   help="open commands per run before /escalate answers 429 (default 8)")
    p.add_argument("--alerts", type=pathlib.Path, default=None, metavar="FILE",
                   help="alert rules and their destinations (TOML; see the README's 'Alerts and hangs'); "
                        "checked at start (default: the built-in rules only, notifying nobody)")
    p.add_argument("--no-default-alerts", action="store_true",
                   help="leave out the built-in alert rules ('hung': a rank stuck for 300 s; 'run in trouble': a "
                        "run lost, failed or degraded), shown in the console and GET /alerts (default: they apply)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="what the server logs to stderr (default info)")
    p.add_argument("--access-log", action="store_true", help="log every HTTP request (default: off)")
    add_limit_args(p)
    return p


def add_db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, metavar="PATH|URL",
                   help=f"SQLite database file, or a PostgreSQL URL postgresql://user@host/dbname that several "
                        f"servers may share (default: {default_db_path()})")


class DatabaseFields(TypedDict, total=False):
    """The ``Settings`` fields ``--db`` sets: one of the two."""

    db_path: pathlib.Path
    db_url: str


def database_settings(db: str | None) -> DatabaseFields:
    """The ``Settings`` fields ``--db`` sets; ValueError for a URL of another database."""
    if db is None:
        return {"db_path": default_db_path()}
    if is_database_url(db):
        return {"db_url": db}
    if "://" in db:
        raise ValueError(f"--db: {db.split('://', 1)[0]}:// is not supported; give a SQLite file or a "
                         f"postgresql:// URL")
    return {"db_path": pathlib.Path(db)}


def settings_from_args(args: argparse.Namespace) -> Settings:
    rules = AlertRules() if args.alerts is None else load_rules(args.alerts)
    return Settings(alert_rules=rules if args.no_default_alerts else with_builtin(rules),
        host=args.host, port=args.port, **database_settings(args.db),
        token=args.token or token_from_env(), read_auth=args.read_auth, open=args.open, artifact_dir=args.artifact_dir,
        lost_after_s=args.lost_after, sweep_lease_s=args.sweep_lease, rank_silent_after_s=args.rank_silent_after,
        command_ttl_s=args.command_ttl,
        stacks_answer_s=args.stacks_answer, max_open_commands=args.max_open_commands,
        **limit_settings(args),
    )


class _Server(uvicorn.Server):
    """Calls ``on_ready`` once the lifespan has started and the socket is accepting."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            yield
            # uvicorn re-raises the signal after a graceful stop; a clean stop on request exits 0.
            self._captured_signals.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_ready()


def uvicorn_config(settings: Settings, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration for ``settings``; the CLI and the test harness share it."""
    return app_config(create_app(settings), settings, **overrides)


def app_config(app: FastAPI, settings: Settings, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration that serves ``app``, made for ``settings``."""
    options: dict[str, Any] = dict(
        log_config=None, access_log=False, ws_max_size=settings.ws_max_size, timeout_graceful_shutdown=5,
        # Compression costs more CPU than it saves on loopback and LAN links.
        ws_per_message_deflate=False, lifespan="on",
        **protocols(settings.limits, app.state.nissa.metrics.connection_refused),
    )
    options.update(overrides)
    return uvicorn.Config(app, **options)


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["prune"]:
        from nissa_server.cli_prune import main as prune

        return prune(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
    except RulesError as err:
        _fail(f"--alerts: {err}")
    except ValueError as err:
        if str(err).startswith("--db: "):  # one line, as for a database that cannot be served
            _fail(str(err))
        parser.error(str(err))
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The read pool logs each reconnection try while the database is away; the server's health says an
    # outage once, when it starts and when it ends.
    logging.getLogger("psycopg.pool").setLevel(max(logging.ERROR, logging.getLogger().level))
    try:
        settings.artifacts_root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        _fail(f"--artifact-dir: cannot create {settings.artifacts_root}: {err.strerror or err}")
    settings = fit_to_open_files(settings)
    app = create_app(settings)
    store: Store = app.state.nissa.store
    config = app_config(app, settings, access_log=args.access_log, log_level=args.log_level)
    try:
        # Now rather than in the lifespan: a bad --db is one line here, a traceback there.
        store.open()
    except UnusableDatabase as err:
        _fail(f"--db: {err}")
    try:
        sock = bind(settings.host, settings.port)
    except OSError as err:
        parser.error(f"--host/--port: cannot bind {settings.host}:{settings.port}: {err.strerror}")
    url = url_of(sock)
    server = _Server(config, on_ready=lambda: _out(f"nissa-server listening on {url}"))
    logger.info("database %s", store.describe())
    # What is loaded by now (the libraries, the app) lives as long as the process: out of the collector's
    # way, a full collection walks only what serving made (a pause every second or so under load, which
    # every ack and watcher waits through).
    gc.collect()
    gc.freeze()
    server.run(sockets=[sock])
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main())
