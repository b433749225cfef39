"""``x``: call one of the run's own commands, typed as ``set_lr value=0.01`` and checked against its declaration
before it is sent (the server checks it again)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from leyline import CallRequest
from leyline.calls import CommandSpec
from tui.loop import parse_call
from tui.safe_text import plain, run_text


class CallForm(ModalScreen[CallRequest | None]):
    """One line: ``NAME ARG=VALUE ...``; enter sends (the request for the run ``run_id``), escape cancels."""

    DEFAULT_CSS = """
    CallForm { align: center middle; }
    CallForm > Vertical { width: 72; height: auto; padding: 1 2; border: thick $accent; background: $surface; }
    CallForm #error { color: $error; height: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, run_id: str, declared: list[CommandSpec], offered: list[str]) -> None:
        super().__init__()
        self.run_id = run_id
        self.declared = declared
        self.offered = offered

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("call a command of the run (NAME ARG=VALUE ...):")
            for line in self.offered:  # the run's own names and help: its text
                yield Static(run_text(f"  {line}"))
            first = self.declared[0].name if self.declared else ""
            yield Input(value=plain(f"{first} ") if first else "", id="call", select_on_focus=False)
            yield Static("", id="error")

    @on(Input.Submitted, "#call")
    def submitted(self, event: Input.Submitted) -> None:
        try:
            name, args = parse_call(event.value, self.declared)
            self.dismiss(CallRequest(run_id=self.run_id, name=name, args=args))
        except ValueError as err:
            self.query_one("#error", Static).update(run_text(err, one_line=False))

    def action_cancel(self) -> None:
        self.dismiss(None)
