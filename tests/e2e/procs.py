"""The console scripts as real subprocesses on loopback, for end-to-end and fault tests."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import threading

from tests.support.server import script_path, start_server_process, stop_process

script = script_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("NISSA_TOKEN", None)
    env.pop("NISSA_SERVER", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class ServerProcess:
    """``nissa-server`` on a fixed loopback port (so that a restart comes back at the same URL)."""

    def __init__(self, db: pathlib.Path, port: int | None = None, token: str | None = None,
                 db_url: str | None = None, extra_args: tuple[str, ...] = ()) -> None:
        self.db = db
        self.db_url = db_url
        """A PostgreSQL database to serve instead of the SQLite file ``db`` (which then names the log)."""
        self.extra_args = extra_args
        self.token = token
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> ServerProcess:
        self.proc, url = start_server_process(self.db, port=self.port, token=self.token, env=_env(),
                                              db_url=self.db_url, extra_args=self.extra_args)
        assert url == self.url, f"nissa-server listens on {url}, not {self.url}"
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


class TrainerProcess:
    """``esper-train`` with its stdout collected line by line (the first line names the run)."""

    def __init__(self, args: list[str], log_dir: pathlib.Path) -> None:
        self.log_dir = log_dir
        self.lines: list[str] = []
        self._run_id = threading.Event()
        self.run_id = ""
        self.proc = subprocess.Popen([script("esper-train"), "--log-dir", str(log_dir), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        self.stderr = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("run id: ") and not self.run_id:
                self.run_id = line.split(": ", 1)[1].strip()
                self._run_id.set()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def wait_run_id(self, timeout: float = 180.0) -> str:
        # A deadline, not a wait: on a busy machine a trainer's start (torch's import, its data and models, the
        # first contact with the server) has taken over a minute before it printed its id.
        assert self._run_id.wait(timeout), f"esper-train printed no run id: {self.lines}"
        return self.run_id

    def wait(self, timeout: float = 120.0) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self._reader.join(10)
        self._err_reader.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    @property
    def log_path(self) -> pathlib.Path:
        return self.log_dir / self.run_id / "events.jsonl"


def log_lines(path: pathlib.Path) -> list[bytes]:
    return path.read_bytes().splitlines()
