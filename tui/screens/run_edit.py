"""Edit a run's group, tags and notes (``PATCH /runs/{id}``): what a run was for, said after the fact."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from leyline.runs import RunSummary
from tui.client import ApiError
from tui.safe_text import plain, run_text

if TYPE_CHECKING:
    from tui.app import EsperWatch


def parse_tags(text: str) -> list[str]:
    """Tags as typed: separated by commas or spaces, each once, in order."""
    return list(dict.fromkeys(t for t in text.replace(",", " ").split() if t))


class RunEditScreen(ModalScreen[bool]):
    """Three fields; enter in any saves all three, escape leaves the run as it was. Dismisses with whether
    the run changed."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    RunEditScreen { align: center middle; }
    RunEditScreen > Vertical { width: 80; height: auto; padding: 1 2; border: thick $accent; background: $surface; }
    RunEditScreen #edit-error { color: $error; height: auto; }
    """

    def __init__(self, run: RunSummary) -> None:
        super().__init__()
        self.run = run

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text.assemble("edit ", (plain(self.run.name or self.run.run_id), "bold"),
                                       plain(f" ({self.run.run_id})")))
            yield Label("group")
            yield Input(self.shown["group"], id="edit-group")
            yield Label("tags (separated by spaces or commas)")
            yield Input(self.shown["tags"], id="edit-tags")
            yield Label("notes")
            yield Input(self.shown["notes"], id="edit-notes")
            yield Static("enter saves · escape cancels", id="edit-error")

    @property
    def shown(self) -> dict[str, str]:
        """What each field shows at first: the run's text as the console draws any (``plain``: a control
        character visible, a line break ↵), never as the terminal would act on it."""
        return {"group": plain(self.run.group or ""), "tags": plain(" ".join(self.run.tags)),
                "notes": plain(self.run.notes or "")}

    @on(Input.Submitted)
    def save(self) -> None:
        """Send the fields changed (one left as shown keeps the run's own text, line breaks and all)."""
        typed = {name: self.query_one(f"#edit-{name}", Input).value for name in ("group", "tags", "notes")}
        changed = {name: value for name, value in typed.items() if value != self.shown[name]}
        fields: dict[str, object] = {}
        if "group" in changed:
            fields["group"] = changed["group"].strip()  # empty: no group
        if "tags" in changed:
            fields["tags"] = parse_tags(changed["tags"])
        if "notes" in changed:
            fields["notes"] = changed["notes"]
        self.send(fields)

    @work(exclusive=True)
    async def send(self, fields: dict[str, object]) -> None:
        app = cast("EsperWatch", self.app)
        try:
            await app.require_client().patch_run(self.run.run_id, **fields)
        except ApiError as err:
            self.query_one("#edit-error", Static).update(run_text(f"not saved: {err}"))
            return
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)
