"""The diff of two runs' configurations: only the keys whose values differ, side by side."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.client import ApiError
from tui.runs_table import config_diff
from tui.safe_text import run_text

if TYPE_CHECKING:
    from tui.app import EsperWatch


class ConfigDiffScreen(ModalScreen[None]):
    """``GET /runs/{id}`` of both runs (the full config), diffed; escape closes."""

    BINDINGS = [Binding("escape,q,equals_sign", "close", "close")]
    DEFAULT_CSS = """
    ConfigDiffScreen { align: center middle; }
    ConfigDiffScreen > Vertical { width: 90%; height: 80%; border: round $accent; background: $surface; }
    ConfigDiffScreen #diff-title { height: auto; padding: 0 1; }
    ConfigDiffScreen DataTable { height: 1fr; }
    """

    def __init__(self, run_a: str, run_b: str) -> None:
        super().__init__()
        self.run_a, self.run_b = run_a, run_b
        self.rows: list[tuple[str, str, str]] | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(run_text(f"config of {self.run_a} (A) against {self.run_b} (B): loading…"), id="diff-title")
            yield DataTable(cursor_type="row", zebra_stripes=True, id="diff")

    def on_mount(self) -> None:
        self.load()

    @work(exclusive=True)
    async def load(self) -> None:
        app: EsperWatch = self.app  # type: ignore[assignment]
        client = app.require_client()
        try:
            a, b = await client.get_run(self.run_a), await client.get_run(self.run_b)
        except ApiError as err:
            self.query_one("#diff-title", Static).update(run_text(f"cannot read the runs: {err}"))
            return
        rows, same = config_diff(a.config or {}, b.config or {})
        self.rows = rows
        table = self.query_one(DataTable)
        table.add_columns("key", run_text(f"A {a.name or a.run_id}"[:40]), run_text(f"B {b.name or b.run_id}"[:40]))
        for row in rows:
            table.add_row(*map(run_text, row))
        self.query_one("#diff-title", Static).update(run_text(
            f"A {self.run_a} · B {self.run_b}: {len(rows)} keys differ, {same} are the same (escape closes)"))

    def action_close(self) -> None:
        self.dismiss(None)
