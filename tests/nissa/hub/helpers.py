"""Reading a hub's run log back in tests."""

from __future__ import annotations

import pathlib

from leyline import Event, EventKind, Kind, decode_event


def read_log(path: pathlib.Path) -> list[Event]:
    return [decode_event(line) for line in pathlib.Path(path).read_bytes().splitlines()]


def kinds(events: list[Event]) -> list[Kind]:
    return [e.kind for e in events]


def dropped_reported(events: list[Event]) -> dict[str, int]:
    """Sum of every ``events_dropped`` report in the log, per kind."""
    total: dict[str, int] = {}
    for e in events:
        if e.kind is EventKind.EVENTS_DROPPED:
            for k, n in e.payload.counts.items():
                total[k] = total.get(k, 0) + n
    return total
