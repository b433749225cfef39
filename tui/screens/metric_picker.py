"""Which metrics the runs table shows as columns: every metric of the page's runs, ticked or not."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import SelectionList, Static

from leyline.query import short_key
from tui.safe_text import run_text


class MetricPickerScreen(ModalScreen[list[str] | None]):
    """Space ticks, enter keeps the ticked ones (none: back to the metrics the runs share), escape cancels."""

    BINDINGS = [Binding("enter", "done", "keep"), Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    MetricPickerScreen { align: center middle; }
    MetricPickerScreen > Vertical { width: 70; height: 80%; border: thick $accent; background: $surface; }
    MetricPickerScreen SelectionList { height: 1fr; }
    """

    def __init__(self, known: list[str], shown: list[str]) -> None:
        super().__init__()
        self.known, self.shown = known, shown

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("metric columns: space ticks, enter keeps (none ticked: those the runs share)")
            choices = [(run_text(short_key(k)), k, k in self.shown) for k in self.known]
            yield SelectionList[str](*choices, id="metrics")

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    def action_done(self) -> None:
        ticked = set(self.query_one(SelectionList).selected)
        self.dismiss([k for k in self.known if k in ticked])

    def action_cancel(self) -> None:
        self.dismiss(None)
