"""History that does not grow forever: delete a run (``DELETE /runs/{id}``), thin old runs' metric
events (``nissa-server prune``). Both refuse a live run, on either backend."""

from __future__ import annotations

import asyncio
import functools
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass

from leyline import CRITICAL_KINDS, KIND_NAMES, KINDS, RunStatus
from nissa_server.runs import RunState
from nissa_server.schemas import DeletedRun
from nissa_server.state import Nissa
from nissa_server.store import Store
from nissa_server.store.history import Removed, old_runs, thin_run
from nissa_server.store.history import delete_run as delete_rows

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class RunIsLive(Exception):
    """The run is live: its trainer is (or may still be) streaming."""


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` → seconds; ValueError says what is expected."""
    match = _AGE.match(text)
    if match is None:
        raise ValueError(f"expected a positive number and a unit (s, m, h, d or w), like 30d; got {text!r}")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def kinds_to_delete(keep: Iterable[str]) -> list[str]:
    """The kinds thinning deletes: metric kinds not in ``keep`` (lifecycle, anomalies and commands,
    every critical kind, are always kept). Raises ValueError for a name that is not a kind."""
    keep = set(keep)
    unknown = sorted(keep - set(KIND_NAMES))
    if unknown:
        raise ValueError(f"unknown kind {unknown[0]!r}")
    return sorted(k.value for k in KINDS if k not in CRITICAL_KINDS and k.value not in keep)


async def delete_run(n: Nissa, run: RunState) -> DeletedRun | None:
    """Delete a run that is not live, artifacts included; None if it is gone already."""
    store = n.store

    def delete(conn) -> Removed | RunStatus | None:
        removed = delete_rows(conn, run.run_key, time.time())
        if isinstance(removed, Removed):
            store.announce_deleted(conn, run.run_key)
        return removed

    removed = await store.call(delete)
    if isinstance(removed, RunStatus):
        raise RunIsLive(f"run {run.run_id!r} is live: stop its trainer first, or wait until it is lost")
    n.forget(run.run_key)
    if removed is None:
        return None
    await asyncio.to_thread(shutil.rmtree, n.settings.artifacts_root / str(run.run_key), True)
    return DeletedRun(run_id=run.run_id, events=removed.events, commands=removed.commands,
                      artifacts=len(removed.artifacts), stored_bytes=removed.stored_bytes)


@dataclass(frozen=True)
class Thinned:
    """What pruning did to one run."""

    run_id: str
    status: str
    events: int
    """Metric events deleted (0 for a skipped run)."""
    stored_bytes: int
    skipped: bool = False
    """Live (now or by the time its turn came): left as it is."""


async def prune(store: Store, older_than_s: float, delete_kinds: list[str], now: float) -> list[Thinned]:
    """Thin every run last seen over ``older_than_s`` ago: delete its events of ``delete_kinds``, a chunk
    per transaction; live runs are skipped."""
    out: list[Thinned] = []
    for run_key, run_id, status in await store.read(old_runs, now - older_than_s):
        events = nbytes = after_id = 0
        while not RunStatus(status).running and delete_kinds:
            removed = await store.call(functools.partial(thin_run, run_key=run_key, kinds=delete_kinds,
                                                         after_id=after_id))
            if not isinstance(removed, Removed):
                status = removed.value if removed is not None else status
                break
            events, nbytes, after_id = events + removed.events, nbytes + removed.stored_bytes, removed.next_id
            if after_id == 0:
                break
        out.append(Thinned(run_id=run_id, status=status, events=events, stored_bytes=nbytes,
                           skipped=RunStatus(status).running))
    return out
