"""Modal screens of the safety net: a run's alerts (``a``) and the stacks of its ranks (``t``)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from leyline import CommandRecord
from leyline.payloads import Scalar
from tui.alerts import AlertView
from tui.format import clock
from tui.safe_text import plain, run_text

_CSS = """
AlertsScreen, StacksScreen { align: center middle; }
AlertsScreen > Vertical, StacksScreen > Vertical {
    width: 90%; height: 80%; padding: 1 2; border: thick $accent; background: $surface;
}
AlertsScreen VerticalScroll, StacksScreen VerticalScroll { height: 1fr; }
"""


def _ago(ts: float | None) -> str:
    return "" if ts is None else clock(ts, "%H:%M:%S")


class AlertsScreen(ModalScreen[None]):
    """Every alert of the run, firing ones first, newest first."""

    DEFAULT_CSS = _CSS
    BINDINGS = [Binding("escape,q,a", "dismiss", "close")]

    def __init__(self, alerts: list[AlertView]) -> None:
        super().__init__()
        self.alerts = sorted(alerts, key=lambda a: (a.state != "firing", -a.fired_ts))

    def compose(self) -> ComposeResult:
        table = Table(expand=True, show_edge=False)
        for name in ("state", "fired", "rule", "about", "message"):
            table.add_column(name, no_wrap=name != "message")
        for a in self.alerts:
            style = "bold red" if a.state == "firing" else "green"
            message = a.message if a.state == "firing" else f"{a.message} ({a.resolution} at {_ago(a.resolved_ts)})"
            if a.command_id:
                message += f"  stacks: command {a.command_id[:8]}"
            table.add_row(run_text(a.state, style), _ago(a.fired_ts), run_text(a.rule), run_text(a.subject),
                          run_text(message))
        with Vertical():
            yield Label(f"[b]alerts[/b] ({len([a for a in self.alerts if a.state == 'firing'])} firing, "
                        f"{len(self.alerts)} in all)" if self.alerts else "[b]alerts[/b]: none on this run")
            with VerticalScroll():
                yield Static(table)


class StacksScreen(ModalScreen[None]):
    """Every thread's Python stack of every rank that answered a ``stacks`` command."""

    DEFAULT_CSS = _CSS
    BINDINGS = [Binding("escape,q", "dismiss", "close")]

    def __init__(self, record: CommandRecord) -> None:
        super().__init__()
        self.record = record

    def texts(self) -> list[tuple[str, str]]:
        """(title, stack text) per rank that answered (one for a run of one rank)."""
        answers: list[tuple[str, dict[str, Scalar] | None]] = [
            (f"rank {r.rank}", r.result) for r in self.record.ranks if r.result] or [
            ("rank 0", self.record.result)]
        out = []
        for title, result in answers:
            if result:
                note = " (cut; the artifact has all of it)" if result.get("truncated") else ""
                out.append((f"{title}: {result.get('threads')} threads{note}", str(result.get("stacks", ""))))
        return out

    def compose(self) -> ComposeResult:
        waiting = [r.rank for r in self.record.ranks if not r.result]
        with Vertical():
            head = Text("stacks", style="bold")
            head.append(plain(f" of run {self.record.run_id} at step {self.record.applied_step}"
                              + (f"; no answer yet from rank {', '.join(map(str, waiting))}" if waiting else "")))
            yield Label(head)
            with VerticalScroll():
                for title, text in self.texts():  # what the ranks answered: their text
                    yield Label(run_text(title, "bold"))
                    yield Static(run_text(text, one_line=False))
