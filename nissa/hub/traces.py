"""Profile traces of a logged run, uploaded as server artifacts after the run (``esper-train upload``).

A live run uploads each trace when its window closes; a run that never reached its server did not. The
run log says which windows completed (``profile_completed``) and where their traces went; an upload finds
them under the run directory and sends those the server does not already hold, byte for byte, under the
name the live run would have used. Only files under ``<run_dir>/profiles/`` are ever sent, whatever a
log line says. Stack files (``stacks`` answers, the stack watchdog's dumps) are the files of
``<run_dir>/stacks/``, sent under their own names.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import platform
import re
from dataclasses import dataclass, field

import httpx
import msgspec

from leyline import DecodeError, ProfileCompleted, RunStarted, decode_event
from nissa.hub.rest import artifact_name, artifact_url, artifacts_url, auth_headers

logger = logging.getLogger(__name__)

STACKS_DIR = "stacks"
_SAFE = re.compile(r"[^A-Za-z0-9_-]+")
_MARKERS = (b'"kind":"profile_completed"', b'"kind":"run_started"')
_listing = msgspec.json.Decoder(list[dict[str, object]])


@dataclass(frozen=True)
class Trace:
    """One completed profile window of the log."""

    name: str
    """Artifact name on the server."""
    path: pathlib.Path | None
    """The trace file under the run directory; None when it is no longer there."""


@dataclass
class TraceUpload:
    """What an upload did with a log's traces."""

    sent: int = 0
    held: int = 0
    """Already on the server with the same bytes."""
    missing: list[str] = field(default_factory=list)
    """Windows whose trace file is gone from the run directory (nothing to send)."""
    errors: list[str] = field(default_factory=list)
    """Traces the server did not take, with why."""

    def describe(self) -> str:
        text = f"traces: {self.sent} sent, {self.held} already held"
        if self.missing:
            text += f", {len(self.missing)} missing locally ({', '.join(self.missing)})"
        if self.errors:
            text += f", {len(self.errors)} failed ({'; '.join(self.errors)})"
        return text


def logged_traces(log_path: pathlib.Path, run_dir: pathlib.Path) -> list[Trace]:
    """Every ``profile_completed`` of the log, named as its run named (or would have named) the trace."""
    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    traces: list[Trace] = []
    with open(log_path, "rb") as f:
        for line in f:
            if not line.endswith(b"\n") or not any(marker in line for marker in _MARKERS):
                continue  # a torn last line was never committed
            try:
                event = decode_event(line)
            except DecodeError:
                continue  # the sender validates every line it sends; a bad one is not a trace
            payload = event.payload
            if isinstance(payload, RunStarted):
                host, pid = payload.host or None, payload.pid or None
                rank = event.rank if payload.world_size > 1 else None
            elif isinstance(payload, ProfileCompleted):
                name = payload.artifact or artifact_name(payload.window, host, pid, rank)
                traces.append(Trace(name=name, path=_local_trace(run_dir, payload)))
    return traces


def _local_trace(run_dir: pathlib.Path, payload: ProfileCompleted) -> pathlib.Path | None:
    """Where the trace is now: as logged, or moved along with the run directory."""
    profiles = (run_dir / "profiles").resolve()
    logged = pathlib.Path(payload.trace_path)
    for candidate in (logged, profiles / payload.window / logged.name):
        resolved = candidate.resolve()
        if resolved.is_relative_to(profiles) and resolved.is_file():
            return resolved
    return None


def stacks_name(kind: str, rank: int, host: str | None = None, pid: int | None = None) -> str:
    """``stacks-<kind>-rank<N>-<host>-<pid>.txt``: the artifact's name and the file's under the run dir."""
    host = _SAFE.sub("-", (platform.node() if host is None else host) or "host")[:40]
    return f"stacks-{_SAFE.sub('-', kind)[:40]}-rank{rank}-{host}-{os.getpid() if pid is None else pid}.txt"


def stack_dumps(run_dir: pathlib.Path, rank: int) -> list[Trace]:
    """Every non-empty stack file of ``rank`` under the run directory."""
    folder = pathlib.Path(run_dir) / STACKS_DIR
    if not folder.is_dir():
        return []
    return [Trace(p.name, p) for p in sorted(folder.glob(f"stacks-*-rank{rank}-*.txt"))
            if p.is_file() and p.stat().st_size > 0]


def upload_traces(traces: list[Trace], server: str, run_id: str, token: str | None,
                  timeout_s: float = 60.0, secret: str | None = None) -> TraceUpload:
    """PUT each trace the server does not hold yet (``secret``: the run's stream secret, which the server
    asks of uploads); reports, never raises for one trace's failure."""
    out = TraceUpload()
    if not traces:
        return out
    headers = auth_headers(token, secret)
    with httpx.Client(headers=headers, timeout=timeout_s) as http:
        try:
            held = _held(http, server, run_id)
        except (httpx.HTTPError, msgspec.DecodeError) as err:
            out.errors.append(f"listing artifacts: {err}")
            return out
        for trace in traces:
            if trace.path is None:
                out.missing.append(trace.name)
                continue
            try:
                body = trace.path.read_bytes()
            except OSError as err:
                out.errors.append(f"{trace.name}: cannot read {trace.path}: {err.strerror or err}")
                continue
            if held.get(trace.name) == hashlib.sha256(body).hexdigest():
                out.held += 1
                continue
            try:
                response = http.put(artifact_url(server, run_id, trace.name), content=body,
                                    headers={"Content-Type": "application/json"})
                response.raise_for_status()
            except httpx.HTTPError as err:
                out.errors.append(f"{trace.name}: {err}")
                continue
            out.sent += 1
    return out


def _held(http: httpx.Client, server: str, run_id: str) -> dict[str, object]:
    response = http.get(artifacts_url(server, run_id))
    response.raise_for_status()
    return {str(a.get("name")): a.get("sha256") for a in _listing.decode(response.content)}
