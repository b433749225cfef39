"""``nissa sweep agent``: runs a sweep's trials on this machine until the sweep needs no more.

The agent leases trials from the server (as many as it has slots), starts each as the sweep's command with the
trial's identity in its environment (``nissa.init`` reads it: the run id, the values, the sweep's project and
group), renews the leases of those still running each time it asks, and says which ended with what exit code.
A trial's process dies with its agent (Linux: the parent-death signal), so a killed agent leaves no trial
running: its leases expire and the server ends those trials ``lost`` (and queues their values again). A trial
the sweep ended (pruned, stopped) is given time to end on its own run's ``stop`` command, then terminated.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from leyline.sweeps import Lease, LeasedTrial, LeaseGranted
from nissa import env
from nissa.sweep.client import SweepClient, SweepError

logger = logging.getLogger(__name__)
STOP_GRACE_S = 20.0
"""How long a trial the sweep ended may take to end on its run's ``stop`` before it is terminated."""
KILL_AFTER_S = 10.0
"""Then how long it may take to end on SIGTERM before SIGKILL."""
_PR_SET_PDEATHSIG = 1


def agent_name() -> str:
    """``<host>-<pid>``, as the server's lease rows name this agent."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:100] or "host"
    return f"{host}-{os.getpid()}"


def die_with_parent() -> None:
    """In the child, before exec: end with the agent (Linux; elsewhere a child outlives a killed agent)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class _Running:
    trial: LeasedTrial
    process: subprocess.Popen
    log: pathlib.Path
    stop_asked: float | None = None


@dataclass
class Agent:
    """One agent of one sweep (see the module docstring)."""

    client: SweepClient
    sweep_id: str
    server: str
    slots: int = 1
    log_dir: pathlib.Path = pathlib.Path("nissa-sweeps")
    token: str | None = None
    poll_s: float = 2.0
    say: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))
    name: str = field(default_factory=agent_name)
    _running: dict[int, _Running] = field(default_factory=dict)
    _exited: dict[str, int] = field(default_factory=dict)
    _lease_s: float = 0.0
    """The lease the server last granted (0: none yet)."""

    def run(self) -> int:
        """Lease, start, watch and report trials until the sweep is over and this agent's trials have ended."""
        failures = 0
        while True:
            self._reap()
            try:
                grant = self.client.lease(self.sweep_id, Lease(
                    agent=self.name, slots=max(0, self.slots - len(self._running)), running=sorted(self._running),
                    exited=dict(self._exited)))
            except SweepError as err:
                if err.status is not None and err.status < 500 and err.status != 429:
                    self.say(f"nissa sweep agent: {err}")
                    self.stop_all()
                    return 1
                failures += 1
                self.say(f"nissa sweep agent: {err}; trying again")
                time.sleep(self._retry_s(failures))
                continue
            failures = 0
            self._lease_s = grant.lease_s
            self._exited.clear()
            self._act(grant)
            if grant.done and not self._running:
                self.say(f"sweep {self.sweep_id}: over; this agent is done")
                return 0
            time.sleep(min(self.poll_s, grant.lease_s / 3))

    def _retry_s(self, failures: int) -> float:
        """Wait before asking the server again: backing off to 30 s, but while trials run, a third of their lease
        at most, so that a server back from a restart hears from this agent before their leases end."""
        wait = min(30.0, self.poll_s * 2 ** min(failures, 4))
        return min(wait, self._lease_s / 3) if self._running and self._lease_s else wait

    def _act(self, grant: LeaseGranted) -> None:
        now = time.monotonic()
        for trial_id in grant.stop:
            running = self._running.get(trial_id)
            if running is not None and running.stop_asked is None:
                running.stop_asked = now
        for running in self._running.values():
            self._hurry(running, now)
        for trial in grant.trials:
            self._start(trial, grant)

    def _hurry(self, running: _Running, now: float) -> None:
        if running.stop_asked is None:
            return
        waited = now - running.stop_asked
        if waited > STOP_GRACE_S + KILL_AFTER_S:
            running.process.kill()
        elif waited > STOP_GRACE_S:
            running.process.terminate()

    def _start(self, trial: LeasedTrial, grant: LeaseGranted) -> None:
        folder = self.log_dir / self.sweep_id
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"trial-{trial.trial_id}.log"
        environ = {**os.environ, **env.trial_environment(
            server=self.server, token=self.token, sweep_id=self.sweep_id, trial_id=trial.trial_id,
            run_id=trial.run_id, params=json.dumps(trial.params), project=grant.project, group=grant.name,
            method=grant.method)}
        with log.open("ab") as out:
            process = subprocess.Popen(grant.command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       env=environ, preexec_fn=die_with_parent)  # noqa: PLW1509 - prctl only
        self._running[trial.trial_id] = _Running(trial, process, log)
        self.say(f"trial {trial.trial_id}: started as run {trial.run_id} with {json.dumps(trial.params)} "
                 f"(log: {log})")

    def _reap(self) -> None:
        for trial_id, running in list(self._running.items()):
            code = running.process.poll()
            if code is None:
                continue
            del self._running[trial_id]
            self._exited[str(trial_id)] = code
            self.say(f"trial {trial_id}: its process exited with code {code}")

    def stop_all(self) -> None:
        """End every trial's process (the agent is being stopped): SIGTERM, then SIGKILL."""
        for running in self._running.values():
            running.process.terminate()
        deadline = time.monotonic() + KILL_AFTER_S
        for running in self._running.values():
            try:
                running.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                running.process.kill()
