"""Pick any series of the run for a new chart: type to filter, enter to choose, escape to cancel."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static

from tui.safe_text import run_text


class SeriesPicker(ModalScreen[str | None]):
    """The run's series names, filtered by every word typed (``ppo kl`` finds ``ppo_update.approx_kl``)."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    SeriesPicker { align: center middle; }
    SeriesPicker > Vertical { width: 70; max-width: 95%; height: 80%; border: round $accent; background: $surface; }
    SeriesPicker OptionList { height: 1fr; }
    """

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names
        self.listed = list(names)  # what the list shows, in order: a series name is the run's text, shown as such

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"add a chart: {len(self.names)} series (type to filter, enter picks)")
            yield Input(placeholder="filter", id="series-filter")
            yield OptionList(*map(run_text, self.names), id="series-list")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def matching(self, text: str) -> list[str]:
        words = text.lower().split()
        return [n for n in self.names if all(w in n.lower() for w in words)]

    @on(Input.Changed, "#series-filter")
    def filter_changed(self, event: Input.Changed) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        self.listed = self.matching(event.value)
        options.add_options(map(run_text, self.listed))
        options.highlighted = 0 if options.option_count else None

    @on(Input.Submitted, "#series-filter")
    def submitted(self, event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is not None:
            self.dismiss(self.listed[options.highlighted])

    @on(OptionList.OptionSelected, "#series-list")
    def selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.listed[event.option_index])

    def key_down(self) -> None:
        self.query_one(OptionList).action_cursor_down()

    def key_up(self) -> None:
        self.query_one(OptionList).action_cursor_up()

    def action_cancel(self) -> None:
        self.dismiss(None)
