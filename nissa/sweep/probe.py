"""``nissa sweep create``'s probe of a ``pbt`` sweep's command: is its loop one a population can be trained in?

The server never sees a sweep's loop, so the command that has the spec checks it before creating the sweep: it
runs the sweep's ``command`` once, with ``$NISSA_SWEEP_PROBE`` set (``nissa.sweep.probed``: ``nissa.init`` then
makes a run that talks to no server, in a temporary directory), until the loop's first step boundary, where the
run writes which hooks the loop set and ends its process. A loop that lacks one PBT needs is refused with the
reason (``trial.pbt_lacks``, the rule a trial's own start applies too), as is a command that fails, or reaches
no step, before the probe could tell.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence

import msgspec

from leyline.sweeps import Parameter, SweepSpec, Value
from leyline.text import visible
from nissa import env
from nissa.sweep.trial import Steering, pbt_lacks

PROBE_TIMEOUT_S = 120.0
"""How long the probed command may take to reach its first step boundary (``--probe-timeout``)."""
MAX_PROBE_TIMEOUT_S = 3600.0
TAIL_LINES = 20
TAIL_BYTES = 4096
POLL_S = 0.05


class ProbeFailed(Exception):
    """The probe could not tell which hooks the loop sets: what happened, in words."""


@dataclasses.dataclass(frozen=True)
class Ended:
    """How the probed process ended: its exit status (None: it was killed at the deadline), the tail of its
    stderr (made visible), and whether it reported its hooks."""

    code: int | None
    tail: str
    steering: Steering | None


def first_values(parameters: Mapping[str, Parameter]) -> dict[str, Value]:
    """Values a trial could start with: each list's first, each range's middle (geometric for ``log``)."""
    values: dict[str, Value] = {}
    for name, p in parameters.items():
        if p.values is not None:
            values[name] = p.values[0]
        else:
            assert p.min is not None and p.max is not None
            values[name] = p.clip(math.sqrt(p.min * p.max) if p.log else (p.min + p.max) / 2)
    return values


def refusal(spec: SweepSpec, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why ``spec`` (a ``pbt`` sweep) cannot be created: its loop lacks a hook PBT needs, or the probe could not
    tell (None: it can)."""
    shown = visible(shlex.join(spec.command), one_line=True)[:300]
    try:
        steering = probe(spec.command, first_values(spec.parameters), timeout_s)
    except ProbeFailed as err:
        return f"the sweep's command, run once as a probe ({shown}), {err}"
    why = pbt_lacks(steering)
    return None if why is None else f"the sweep's loop ({shown}) cannot be a pbt sweep's trial: {why}"


def probe(command: Sequence[str], params: Mapping[str, Value], timeout_s: float = PROBE_TIMEOUT_S) -> Steering:
    """Run ``command`` as a probe up to its loop's first step boundary; which hooks the loop set. ``ProbeFailed``
    says why not: the command could not start, ended (crashed) before that step, or did not reach it in
    ``timeout_s`` (then it is killed, with every process of its group)."""
    with tempfile.TemporaryDirectory(prefix="nissa-probe-") as folder:
        ended = _run(list(command), dict(params), pathlib.Path(folder), timeout_s)
    if ended.steering is not None:
        return ended.steering
    if ended.code is None:
        why = (f"reached no step boundary within {timeout_s:g} s (--probe-timeout) and was killed, "
               "with every process it started")
    elif ended.code != 0:
        why = f"exited with status {ended.code} before its loop's first step boundary"
    else:
        why = ("ended (status 0) without reaching a step boundary of a nissa run (run.step(), or "
               "run.hooks.step_boundary in a loop that counts its own steps)")
    raise ProbeFailed(why + (f"; its stderr ended with:\n{ended.tail}" if ended.tail else "; its stderr was empty"))


def _run(command: list[str], params: dict[str, Value], folder: pathlib.Path, timeout_s: float) -> Ended:
    report, errors = folder / "hooks.json", folder / "stderr"
    environ = {k: v for k, v in os.environ.items() if k not in (env.SWEEP_TRIAL, env.SERVER, env.TOKEN)}
    environ[env.SWEEP_PROBE] = json.dumps({"report": str(report), "log_dir": str(folder / "runs"),
                                           "params": params})
    from nissa.sweep.agent import die_with_parent

    with errors.open("wb") as err:
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                       env=environ, start_new_session=True,
                                       preexec_fn=die_with_parent)  # noqa: PLW1509 - prctl only
        except OSError as failed:
            raise ProbeFailed(f"could not be started: {failed}") from None
        try:
            code = _wait(process, report, time.monotonic() + timeout_s)
        finally:
            _end_group(process)
    try:
        steering = msgspec.json.decode(report.read_bytes(), type=Steering) if report.exists() else None
    except msgspec.DecodeError as bad:
        raise ProbeFailed("wrote a report of its hooks that cannot be read: "
                          f"{visible(str(bad), one_line=True)[:300]}") from None
    return Ended(code=code, tail=_tail(errors), steering=steering)


def _wait(process: subprocess.Popen, report: pathlib.Path, deadline: float) -> int | None:
    """The process's exit status once it exits, 0 once it reported (its launcher may linger), None at the
    deadline. It is left unreaped, so its group's id stays its own until ``_end_group``."""
    while time.monotonic() < deadline:
        if report.exists():
            return 0
        ended = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if ended is not None:
            return ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status
        time.sleep(POLL_S)
    return None


def _end_group(process: subprocess.Popen) -> None:
    """Kill what is left of the probe's process group (what the command started, or all of it), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _tail(path: pathlib.Path) -> str:
    """The last lines of the probe's stderr, each control character shown as a visible stand-in."""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - TAIL_BYTES))
        text = f.read().decode("utf-8", errors="replace")
    lines = text.rstrip().splitlines()[-TAIL_LINES:]
    return "\n".join(f"  | {visible(line, one_line=True)}" for line in lines)
