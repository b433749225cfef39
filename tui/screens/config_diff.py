"""The diff of several runs' configurations (``GET /config-diff``): only the keys whose values differ,
a column per run."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from leyline.groups import ConfigDiff, DiffRow
from tui.client import ApiError
from tui.safe_text import run_text
from tui.screens.base import left

if TYPE_CHECKING:
    from tui.app import EsperWatch


class ConfigDiffScreen(ModalScreen[None]):
    """The server's diff of the runs named, in their order; escape closes."""

    BINDINGS = [Binding("escape,q,equals_sign", "close", "close")]
    DEFAULT_CSS = """
    ConfigDiffScreen { align: center middle; }
    ConfigDiffScreen > Vertical { width: 95%; height: 85%; border: round $accent; background: $surface; }
    ConfigDiffScreen #diff-title { height: auto; padding: 0 1; }
    ConfigDiffScreen DataTable { height: 1fr; }
    """

    def __init__(self, run_ids: list[str]) -> None:
        super().__init__()
        self.run_ids = run_ids
        self.diff: ConfigDiff | None = None

    @property
    def rows(self) -> list[DiffRow] | None:
        """The keys that differ, once read."""
        return None if self.diff is None else self.diff.rows

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(run_text(f"config of {len(self.run_ids)} runs: loading…"), id="diff-title")
            yield DataTable(cursor_type="row", zebra_stripes=True, id="diff")

    def on_mount(self) -> None:
        self.load()

    @work(exclusive=True)
    async def load(self) -> None:
        app = cast("EsperWatch", self.app)
        try:
            diff = await app.require_client().config_diff(self.run_ids)
        except ApiError as err:
            if not left(self):
                self.query_one("#diff-title", Static).update(run_text(f"cannot diff the runs: {err}"))
            return
        if left(self):
            return
        self.diff = diff
        table = self.query_one(DataTable)
        table.add_column("key", key="key")
        # The server's lists, one name per run: a short one leaves columns out rather than failing the screen.
        for i, (run_id, name) in enumerate(zip(diff.runs, diff.names, strict=False)):
            table.add_column(run_text(f"{chr(65 + i) if i < 26 else i + 1} {name or run_id}"[:30]), key=f"run{i}")
        for row in diff.rows:
            cells = [run_text("—", style="dim") if v is None else run_text(v[:40]) for v in row.values]
            table.add_row(run_text(row.key, style="bold"), *cells)
        self.query_one("#diff-title", Static).update(run_text(
            f"{len(diff.runs)} runs: {len(diff.rows)} keys differ, {diff.same} the same (escape closes)"))

    def action_close(self) -> None:
        self.dismiss(None)
