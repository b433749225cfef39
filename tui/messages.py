"""Messages from the network workers to the screens; widgets never touch the network."""

from __future__ import annotations

from textual.message import Message

from leyline import CommandRecord, Event
from tui.client import ApiError, Connection
from tui.runs_query import TableData


class EventsArrived(Message):
    """A batch of events from the watch stream, in server order."""

    def __init__(self, events: list[Event]) -> None:
        super().__init__()
        self.events = events


class ConnectionChanged(Message):
    """The watch stream connected, lost its connection, or was refused."""

    def __init__(self, connection: Connection, reconnects: int) -> None:
        super().__init__()
        self.connection = connection
        self.reconnects = reconnects


class CommandPolled(Message):
    """``GET /commands/{id}`` answered for a command this console issued."""

    def __init__(self, record: CommandRecord) -> None:
        super().__init__()
        self.record = record


class ApiFailed(Message):
    """A request failed; ``what`` says what the operator asked for."""

    def __init__(self, what: str, error: ApiError) -> None:
        super().__init__()
        self.what = what
        self.error = error


class RunsLoaded(Message):
    """The runs table's page (or groups), freshly fetched."""

    def __init__(self, data: TableData) -> None:
        super().__init__()
        self.data = data


class ReplayLoaded(Message):
    """Every stored event of a run, ready to step through."""

    def __init__(self, events: list[Event]) -> None:
        super().__init__()
        self.events = events


class RunStatusPolled(Message):
    """``GET /runs/{id}`` said what the run's status is now."""

    def __init__(self, status: str) -> None:
        super().__init__()
        self.status = status


class WriteAccess(Message):
    """``GET /auth`` said whether the server takes this console's token for commands."""

    def __init__(self, allowed: bool) -> None:
        super().__init__()
        self.allowed = allowed
