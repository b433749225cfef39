"""The event log: bounded, colored by severity, filtered by the operator's terms."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual.widgets import RichLog

from leyline import Severity
from tui.format import LogFilter, LogLine
from tui.safe_text import plain

SEVERITY_STYLE = {
    Severity.DEBUG: "dim",
    Severity.INFO: "",
    Severity.WARNING: "yellow",
    Severity.ERROR: "bold red",
    Severity.CRITICAL: "bold white on red",
}


def styled(line: LogLine) -> Text:
    return Text(plain(line.plain), style=SEVERITY_STYLE.get(line.severity, ""), no_wrap=True, overflow="ellipsis")


class EventLog(RichLog):
    """A ``RichLog`` that keeps at most ``max_lines`` and shows only lines that pass the filter."""

    def __init__(self, max_lines: int, **kwargs: Any) -> None:  # RichLog's own
        super().__init__(max_lines=max_lines, min_width=20, wrap=False, markup=False, highlight=False, **kwargs)
        self.log_filter = LogFilter()
        self.shown = 0  # lines written since the last clear, for tests and the border title

    def add(self, lines: Iterable[LogLine]) -> None:
        matching = [line for line in lines if self.log_filter.matches(line)]
        if self.max_lines is not None:
            matching = matching[-self.max_lines:]  # older ones would scroll out of the bound anyway
        for line in matching:
            self.write(styled(line))
        self.shown += len(matching)

    def refilter(self, log_filter: LogFilter, lines: Iterable[LogLine]) -> None:
        self.log_filter = log_filter
        self.clear()
        self.shown = 0
        self.add(lines)
