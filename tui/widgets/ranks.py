"""The ranks panel: one line per rank of a multi-rank run (shown only for those)."""

from __future__ import annotations

from rich import box
from rich.console import JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from tui.ranks import RankRow
from tui.safe_text import run_text


class RanksPanel(Static):
    """Step rate, lag in steps, hub queue and last heartbeat of each rank; a straggler is marked, and so
    is a rank a firing hang alert names (alive but not advancing)."""

    rows: reactive[tuple[RankRow, ...]] = reactive((), layout=True)
    hung: reactive[frozenset[int]] = reactive(frozenset())

    def render(self) -> RenderableType:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, expand=True, padding=(0, 1))
        columns: tuple[tuple[str, JustifyMethod], ...] = (
            ("rank", "right"), ("steps/s", "right"), ("lag", "right"), ("queue", "right"), ("beat", "right"),
            ("", "left"))
        for name, justify in columns:
            table.add_column(name, justify=justify, no_wrap=True)
        for r in self.rows:
            rate = "—" if r.steps_per_s is None else f"{r.steps_per_s:.1f}"
            beat = "—" if r.heartbeat_age_s is None else f"{r.heartbeat_age_s:.0f}s"
            late = r.heartbeat_age_s is not None and r.heartbeat_age_s > 15
            table.add_row(str(r.rank), rate, str(r.lag), "—" if r.queue_depth is None else str(r.queue_depth),
                          Text(beat, style="bold red" if late else ""),
                          _mark(r, r.rank in self.hung))
        return table


def _mark(row: RankRow, hung: bool) -> Text:
    if hung:
        return Text("HUNG: not advancing", style="bold white on red")
    return run_text(f"slow: {row.straggler}" if row.straggler else "", "bold yellow")
