"""Counters a hub keeps, and the delivery report ``flush`` and ``close`` return."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class HubStats:
    """Live counters; each field has one writer thread (worker, sender or receiver)."""

    logged: int = 0
    """Highest seq written to the run log."""
    sent: int = 0
    """Events sent to the server (re-sends after a reconnect count again)."""
    acked: int = 0
    """Highest seq the server says it stored durably."""
    reconnects: int = 0
    connected: bool = False
    last_error: str | None = None
    unlogged: int = 0
    """Events lost because the log could not be written (disk full, I/O error)."""
    invalid: int = 0
    """Events refused by the worker because they do not encode or validate."""


@dataclass(frozen=True)
class DeliveryReport:
    """What a hub could not deliver when ``flush`` or ``close`` returned."""

    logged: int
    """Events in the run log (the source of truth)."""
    acked: int
    """Of those, how many the server has stored (0 without a server)."""
    pending: int
    """Events still in memory, not yet logged (lost if the process ends now)."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Metric events dropped under overload, per kind, since the hub started."""
    lost: int = 0
    """Events that could not be logged or were invalid."""
    server: bool = False
    """Whether the hub streams to a server at all."""
    refused: str | None = None
    """Why the server refused the stream, if it did (a wrong token, another run's secret)."""

    @property
    def unsent(self) -> int:
        """Logged events the server does not have yet (they can be uploaded from the log)."""
        return max(0, self.logged - self.acked) if self.server else 0

    @property
    def complete(self) -> bool:
        """Everything emitted reached its destination (the log, and the server if there is one)."""
        return self.pending == 0 and self.unsent == 0 and self.lost == 0

    def describe(self) -> str:
        """One line for a person: what is where."""
        parts = [f"{self.logged} events logged"]
        if self.server:
            parts.append(f"{self.acked} stored by the server, {self.unsent} not sent")
        if self.refused:
            parts.append(f"the server refused the stream ({self.refused})")
        if self.pending:
            parts.append(f"{self.pending} still in memory")
        if self.lost:
            parts.append(f"{self.lost} lost")
        total_dropped = sum(self.dropped.values())
        if total_dropped:
            parts.append(f"{total_dropped} metric events dropped under load")
        return ", ".join(parts)
