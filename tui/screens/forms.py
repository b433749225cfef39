"""Small modal screens: the escalation form and the key help."""

from __future__ import annotations

from rich.table import Table
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.validation import Integer
from textual.widgets import Button, Input, Label, Static

from leyline import CommandAction
from leyline.commands import MAX_DEBUG_EPOCHS, MAX_PROFILE_BATCHES

_FORM_CSS = """
EscalateForm, HelpScreen { align: center middle; }
EscalateForm > Vertical, HelpScreen > Vertical {
    width: 64; height: auto; padding: 1 2; border: thick $accent; background: $surface;
}
EscalateForm Horizontal { height: auto; margin-top: 1; }
EscalateForm Button { margin-right: 2; }
EscalateForm #error { color: $error; height: auto; }
"""


class EscalateForm(ModalScreen[int | None]):
    """Ask how long a debug (epochs) or profile (batches) window should be; dismisses with it or None."""

    DEFAULT_CSS = _FORM_CSS
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, action: CommandAction, default: int) -> None:
        super().__init__()
        self.action = action
        self.default = default
        self.unit, self.maximum = (
            ("epochs", MAX_DEBUG_EPOCHS) if action is CommandAction.DEBUG else ("batches", MAX_PROFILE_BATCHES)
        )

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"[b]{self.action.value} window[/b]: how many {self.unit}? (1..{self.maximum})")
            yield Input(str(self.default), type="integer", id="amount",
                        validators=[Integer(minimum=1, maximum=self.maximum)])
            yield Static("", id="error")
            with Horizontal():
                yield Button("Request", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#amount", Input).focus()

    def _submit(self) -> None:
        box = self.query_one("#amount", Input)
        result = box.validate(box.value)
        if result is not None and not result.is_valid:
            self.query_one("#error", Static).update("; ".join(result.failure_descriptions))
            return
        self.dismiss(int(box.value))

    @on(Input.Submitted, "#amount")
    def submitted(self) -> None:
        self._submit()

    @on(Button.Pressed, "#ok")
    def ok(self) -> None:
        self._submit()

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


HELP = (
    ("r", "run picker: choose a run (enter opens it; a finished run opens as a replay)"),
    ("s", "run picker: sort by the next column (or click a column header)"),
    ("d", "debug window: telemetry goes to DEBUG for a few epochs, then back by itself"),
    ("D", "debug window of a length you choose"),
    ("p", "profile window: choose how many batches to profile"),
    ("/", "filter the event log: words, !word, kind:ppo, sev:warning, env:2; esc clears"),
    ("← →", "replay: one event back / forward"),
    ("[ ]", "replay: one epoch back / forward"),
    ("home end", "replay: first / last event; space plays and pauses; click the bar to scrub"),
    ("?", "this help"),
    ("q", "quit"),
)


class HelpScreen(ModalScreen[None]):
    """Every key, one line each."""

    DEFAULT_CSS = _FORM_CSS
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, what in HELP:
            table.add_row(key, what)
        with Vertical():
            yield Label("[b]esper-watch keys[/b] (the mouse works too)")
            yield Static(table)
