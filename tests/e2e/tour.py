"""A user's shell for the README tour: bash in a fresh directory, the virtual environment activated by the
tour's own line (not before), processes left running in the background, consoles in a pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pathlib
import pty
import struct
import subprocess
import termios
import threading
from collections.abc import Callable

from bench.processes import stop_process

from .api import wait_for


class Shell:
    """Runs tour command lines through ``bash -c`` as a user's terminal would, after ``expand``."""

    def __init__(self, cwd: pathlib.Path, venv: pathlib.Path, ports: dict[str, int]) -> None:
        self.cwd = cwd
        (cwd / ".venv").symlink_to(venv)  # the tour runs from the repository's root, where .venv is
        self.ports = ports
        self.values: dict[str, str | None] = {"<run_id>": None, "<command_id>": None}
        self.activation: str | None = None
        self.env = _without_the_venv(dict(os.environ), venv)
        self.env.update(PYTHONUNBUFFERED="1", XDG_STATE_HOME=str(cwd / "state"), TERM="xterm-256color")
        self.procs: dict[str, subprocess.Popen] = {}
        self._out: dict[str, list[str]] = {}

    def expand(self, line: str) -> str:
        for fixed, port in self.ports.items():
            line = line.replace(fixed, str(port))
        for placeholder, value in self.values.items():
            if placeholder in line:
                assert value is not None, f"{placeholder} is used before the tour has one: {line}"
                line = line.replace(placeholder, value)
        return line

    def argv(self, line: str) -> list[str]:
        command = f"exec {self.expand(line)}"
        return ["bash", "-c", command if self.activation is None else f"{self.activation} && {command}"]

    def activate(self, line: str) -> None:
        """The tour's activation line; from here on every command line runs after it."""
        found = subprocess.run(["bash", "-c", f"{line} && command -v esper-train nissa-server esper-watch"],
                               cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=60)
        assert found.returncode == 0, found.stdout + found.stderr
        assert all(path.startswith(str(self.cwd / ".venv")) or ".venv" in path
                   for path in found.stdout.split()), found.stdout
        self.activation = line

    def run(self, line: str, timeout: float = 180) -> str:
        """A command that ends: its stdout, once it exited 0."""
        done = subprocess.run(self.argv(line), cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def start(self, line: str, name: str, ready: Callable[[str], bool], timeout: float = 120) -> subprocess.Popen:
        """A command that stays up; returns once ``ready`` holds for its output (stdout and stderr)."""
        proc = subprocess.Popen(self.argv(line), cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.procs[name], self._out[name] = proc, []
        threading.Thread(target=self._collect, args=(proc, self._out[name]), daemon=True).start()

        def up() -> bool:
            assert proc.poll() is None or ready(self.output(name)), f"{line}: exited\n{self.output(name)}"
            return ready(self.output(name))

        wait_for(up, timeout, f"{line} to be ready")
        return proc

    def output(self, name: str) -> str:
        return "".join(self._out.get(name, []))

    log = output

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None:
            stop_process(proc, 30, close_stdout=False)  # the collecting thread reads it to its end

    def console(self, line: str, shows: str, timeout: float = 90) -> None:
        """A console in a 120×40 pseudo-terminal: once it shows ``shows``, ``q`` must end it cleanly."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        proc = subprocess.Popen(self.argv(line), cwd=self.cwd, env=self.env, stdin=slave, stdout=slave,
                                stderr=slave, start_new_session=True)
        os.close(slave)
        screen: list[bytes] = []
        reader = threading.Thread(target=_read_pty, args=(master, screen), daemon=True)
        reader.start()
        try:
            wait_for(lambda: shows in _text(screen) or proc.poll() is not None, timeout, f"{line} to show {shows}")
            assert proc.poll() is None, f"{line}: exited early\n{_text(screen)[-2000:]}"
            os.write(master, b"q")
            assert proc.wait(timeout=60) == 0, _text(screen)[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
            reader.join(timeout=10)
            os.close(master)

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)

    @staticmethod
    def _collect(proc: subprocess.Popen, out: list[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)


def _without_the_venv(env: dict[str, str], venv: pathlib.Path) -> dict[str, str]:
    """The environment of a terminal where the tour's activation has not run yet."""
    bins = {str(venv / "bin"), str((venv / "bin").resolve())}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p not in bins)
    for name in ("VIRTUAL_ENV", "NISSA_TOKEN", "NISSA_SERVER", "NISSA_RUN_ID", "PYTHONHOME"):
        env.pop(name, None)
    return env


def _read_pty(master: int, screen: list[bytes]) -> None:
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the console closed its side
            return
        if not data:
            return
        screen.append(data)


def _text(screen: list[bytes]) -> str:
    return b"".join(screen).decode("utf-8", errors="replace")
