"""Real nissa-server instances on 127.0.0.1 with a kernel-chosen port.

``running_server``: in-process uvicorn on a background thread (uvicorn's own test pattern).
``start_server_process``: the ``nissa-server`` console script as a subprocess.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import uvicorn
from fastapi import FastAPI

from bench.processes import stop_process
from nissa_server.cli import bind, url_of, uvicorn_config
from nissa_server.settings import Settings
from tests.support.databases import database_for
from tests.support.waiting import wait_for

LISTENING = re.compile(r"^nissa-server listening on (http://\S+)$")


class ServerUrl(str):
    """The server's base URL (a plain ``str``), with the app and settings for white-box checks."""

    app: FastAPI
    settings: Settings

    @property
    def ws(self) -> str:
        return "ws" + self[len("http"):]


@contextlib.contextmanager
def running_server(tmp_path: pathlib.Path, **overrides: Any) -> Iterator[ServerUrl]:
    """Serve ``create_app`` on 127.0.0.1:0 in a thread; yields its URL, stops it on exit.

    ``overrides`` are ``Settings`` fields (``token=``, ``lost_after_s=``, ...); without ``db_path`` or
    ``db_url`` the database is the test's own of the current backend (``tests.support.databases``):
    ``tmp_path / "nissa.db"`` on SQLite.
    """
    if "db_path" not in overrides and "db_url" not in overrides:
        overrides.update({k: v for k, v in database_for(tmp_path).items() if k not in overrides})
    if "db_url" in overrides:
        overrides.setdefault("artifact_dir", tmp_path / "artifacts")
    settings = Settings(host="127.0.0.1", port=0, **overrides)
    config = uvicorn_config(settings, timeout_graceful_shutdown=3)
    app = config.app
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(config)
    def serve() -> None:
        with contextlib.suppress(SystemExit):  # uvicorn's way to end after a failed start (logged already)
            server.run(sockets=[sock])

    thread = threading.Thread(target=serve, name="nissa-test-server", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), timeout=60, message="server start")
        if not server.started:
            raise RuntimeError("nissa-server failed to start (see the log above)")
        url = ServerUrl(url_of(sock))
        url.app, url.settings = app, settings
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def script_path(name: str) -> str:
    """A console script of this environment, found next to the running interpreter first."""
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} is not installed in this environment")
    return found


def start_server_process(db_path: pathlib.Path, port: int = 0, token: str | None = None,
                         extra_args: Sequence[str] = (), env: dict[str, str] | None = None,
                         timeout: float = 60.0, preexec_fn: Callable[[], None] | None = None,
                         db_url: str | None = None) -> tuple[subprocess.Popen, str]:
    """Start ``nissa-server`` and wait for its listening line; returns (process, base URL).

    Its database is ``db_url`` if given (PostgreSQL), else the SQLite file ``db_path``. Its stderr goes to
    ``<db_path>.log`` so a chatty server can never block on a full pipe.
    """
    args = [script_path("nissa-server"), "--host", "127.0.0.1", "--port", str(port), "--db",
            db_url or str(db_path), *extra_args]
    if token is not None:
        args += ["--token", token]
    db_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(db_path.with_name(db_path.name + ".log"), "ab")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, env=env, preexec_fn=preexec_fn)
    log.close()
    lines: list[str] = []
    stdout = proc.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    match = LISTENING.match(lines[0].strip()) if lines else None
    if match is None:
        stop_process(proc)
        raise RuntimeError(f"nissa-server did not report listening within {timeout:g} s: {lines!r}")
    return proc, match.group(1)
