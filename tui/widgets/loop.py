"""The panel of any loop's run: its latest metrics and the commands it declared (``x`` calls one)."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from tui.safe_text import run_text


class LoopPanel(Static):
    """Latest value of each metric (with its step), then the run's own commands."""

    rows: reactive[tuple[tuple[str, str, str], ...]] = reactive((), layout=True)
    offered: reactive[tuple[str, ...]] = reactive((), layout=True)

    def render(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self.rows:
            table = Table(box=box.SIMPLE_HEAD, show_edge=False, expand=True, padding=(0, 0))
            for name in ("metric", "value", "step"):
                table.add_column(name, no_wrap=True, overflow="ellipsis")
            for row in self.rows:
                table.add_row(*(run_text(cell) for cell in row))
            parts.append(table)
        else:
            parts.append(Text("no metrics yet", style="dim"))
        if self.offered:
            parts.append(Text("commands (x to call):", style="bold"))
            parts.extend(run_text(f"  {line}") for line in self.offered)
        return Group(*parts)
