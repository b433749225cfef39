"""What the chart screen's network workers tell it, in order, through its message queue."""

from __future__ import annotations

from textual.message import Message

from leyline import Event
from leyline.runs import RunSummary
from leyline.series import Marker


class SeriesEvents(Message):
    def __init__(self, run_id: str, events: list[Event]) -> None:
        super().__init__()
        self.run_id, self.events = run_id, events


class HistoryLoaded(Message):
    def __init__(self, run_id: str, name: str, axis: str, series: list[dict]) -> None:
        super().__init__()
        self.run_id, self.name, self.axis, self.series = run_id, name, axis, series


class MarkersLoaded(Message):
    def __init__(self, run_id: str, markers: list[Marker]) -> None:
        super().__init__()
        self.run_id, self.markers = run_id, markers


class HistoryDue(Message):
    """The run's live stream is open (or it is over): its history can be read without a gap."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id


class RunKnown(Message):
    def __init__(self, run: RunSummary, names: list[str] | None) -> None:
        super().__init__()
        self.run, self.names = run, names
