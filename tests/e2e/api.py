"""Reading what a live nissa-server stored, through its REST interface only."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from leyline import Event, decode_events


def server_events(url: str, run_id: str, *, rank: int, kind: str | None = None, page: int = 1000) -> list[Event]:
    """Every stored event of one rank of a run, following the ``after_seq`` cursor page by page."""
    events: list[Event] = []
    after = 0
    while True:
        params: dict[str, str | int] = {"after_seq": after, "limit": page, "rank": rank}
        if kind:
            params["kind"] = kind
        resp = httpx.get(f"{url}/runs/{run_id}/events", params=params, timeout=30)
        resp.raise_for_status()
        batch = decode_events(resp.content)
        fresh = [e for e in batch if e.seq > after]
        if not fresh:
            return events
        events.extend(fresh)
        after = max(e.seq for e in fresh)


def trainer_events(url: str, run_id: str, rank: int = 0, **kw) -> list[Event]:
    events = server_events(url, run_id, rank=rank, **kw)
    assert all(e.rank == rank for e in events)
    return events


def wait_for(predicate: Callable[[], object], timeout: float, what: str, every: float = 0.1) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def run_known(url: str, run_id: str) -> bool:
    try:
        resp = httpx.get(f"{url}/runs/{run_id}", timeout=5)
    except httpx.TransportError:
        return False
    return resp.status_code == 200


def escalate(url: str, body: dict) -> dict:
    resp = httpx.post(f"{url}/escalate", json=body, timeout=10)
    assert resp.status_code == 202, resp.text
    return resp.json()


def command(url: str, command_id: str) -> dict:
    resp = httpx.get(f"{url}/commands/{command_id}", timeout=10)
    resp.raise_for_status()
    return resp.json()


def summary_of(url: str, run_id: str, key: str, value: float, timeout: float = 30) -> dict:
    """The run's summary of series ``key`` (``rounds``) once its last value is ``value``: the server
    summarises a run's series a little after it stores them."""
    def reached() -> dict | None:
        found = httpx.get(f"{url}/runs/{run_id}", timeout=10).json()["metrics"].get(key)
        return found if found is not None and found["last"] == value else None
    return wait_for(reached, timeout, f"{run_id}'s {key} to be {value}")  # type: ignore[return-value]
