"""Which column the runs table is sorted by: every column the server sorts by, chosen by name (typing narrows
the list), not cycled through a key press at a time."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from tui.safe_text import run_text


class SortPickerScreen(ModalScreen[str | None]):
    """Type to narrow, ↑/↓ and enter (or a click) sort by a column; the column sorted by already reverses its
    order; escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "cancel"), Binding("down", "move(1)", show=False),
                Binding("up", "move(-1)", show=False)]
    DEFAULT_CSS = """
    SortPickerScreen { align: center middle; }
    SortPickerScreen > Vertical { width: 60; height: 70%; border: thick $accent; background: $surface; }
    SortPickerScreen OptionList { height: 1fr; }
    """

    def __init__(self, keys: list[str], current: str, reverse: bool) -> None:
        super().__init__()
        self.keys, self.current, self.reverse = keys, current, reverse

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("sort by: type to narrow, enter sorts (the current column again: the other way)")
            yield Input(placeholder="column", id="sort-filter")
            yield OptionList(id="sort-columns")

    def on_mount(self) -> None:
        self._fill("")
        self.query_one(Input).focus()

    def _label(self, key: str) -> str:
        return f"{key} {'↓' if self.reverse else '↑'}" if key == self.current else key

    def _fill(self, text: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        wanted = text.casefold()
        matches = [k for k in self.keys if wanted in k.casefold()]
        # A column's name is the run's text (a metric or a config key).
        options.add_options([Option(run_text(self._label(k)), id=k) for k in matches])
        if matches:
            options.highlighted = matches.index(text) if text in matches else 0

    @on(Input.Changed, "#sort-filter")
    def narrow(self, event: Input.Changed) -> None:
        self._fill(event.value.strip())

    @on(Input.Submitted, "#sort-filter")
    def pick_highlighted(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is not None:
            self.dismiss(options.get_option_at_index(options.highlighted).id)

    @on(OptionList.OptionSelected)
    def pick(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_move(self, by: int) -> None:
        options = self.query_one(OptionList)
        if options.option_count:
            options.highlighted = ((options.highlighted or 0) + by) % options.option_count

    def action_cancel(self) -> None:
        self.dismiss(None)
