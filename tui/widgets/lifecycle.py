"""Panels that follow things through their lives: seeds, commands, profiler windows."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from leyline import CommandStatus
from leyline.panels import ops_table
from tui.format import short_id
from tui.safe_text import plain, run_text
from tui.views import CommandRow, ProfileView, TimelineRow

STATUS_STYLE = {
    CommandStatus.QUEUED: "yellow",
    CommandStatus.DELIVERED: "cyan",
    CommandStatus.APPLIED: "bold cyan",
    CommandStatus.COMPLETED: "bold green",
    CommandStatus.FAILED: "bold red",
    CommandStatus.EXPIRED: "red",
    CommandStatus.REJECTED: "bold red",
}


def _grid(*columns: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, expand=True, padding=(0, 0))
    for i, name in enumerate(columns):
        table.add_column(name, no_wrap=i < len(columns) - 1, overflow="ellipsis")
    return table


class SeedTimeline(Static):
    """Seed lifecycle events, newest first: germinated, stage changes, gates, fossilized, pruned."""

    rows: reactive[tuple[TimelineRow, ...]] = reactive((), layout=True)

    def render(self) -> RenderableType:
        if not self.rows:
            return Text("no seed activity yet", style="dim")
        table = _grid("epoch", "env", "slot", "seed", "what")
        for r in self.rows:
            style = "green" if "fossilized" in r.what else "red" if "pruned" in r.what or "FAILED" in r.what else ""
            table.add_row(str(r.epoch), "—" if r.env is None else str(r.env), run_text(r.slot), run_text(r.seed_id),
                          run_text(r.what, style))
        return table


def command_lines(row: CommandRow) -> Text:
    """Two lines: id, action and the current status; then the way it came there and the result."""
    text = run_text(f"{short_id(row.command_id):<8} {row.action:<7} ")
    text.append(row.status.value, style=STATUS_STYLE.get(row.status, "bold"))
    applied = next((step for s, step in row.path if s == "applied" and step is not None), None)
    if applied is not None:
        text.append(f" @ step {applied}")
    trail = Text("\n  " + " › ".join(s for s, _ in row.path), style="dim")
    detail = row.result or row.message
    if detail:
        trail.append(plain(f"  {detail}"))
    text.append_text(trail)
    return text


class CommandPanel(Static):
    """Each command this run received, through queued → delivered → applied → completed."""

    DEFAULT_CSS = "CommandPanel { text-wrap: nowrap; text-overflow: ellipsis; }"

    rows: reactive[tuple[CommandRow, ...]] = reactive((), layout=True)

    def render(self) -> RenderableType:
        if not self.rows:
            return Text("no commands yet: d opens a debug window, p a profile window", style="dim")
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, r in enumerate(self.rows):
            if i:
                out.append("\n")
            out.append_text(command_lines(r))
        return out


class ProfilePanel(Static):
    """The last profiler window: where its trace is and the operators that cost most."""

    view: reactive[ProfileView] = reactive(ProfileView("none"), layout=True)

    def render(self) -> RenderableType:
        v = self.view
        if v.state == "none":
            return Text("no profile window yet: press p", style="dim")
        if v.state == "running":
            return run_text(f"profiling window {v.window}: {v.span}…", "yellow")
        head = run_text(f"window {v.window}: {v.span} in {v.wall_s:.2f}s")
        head.append("\n")
        head.append("trace ", style="dim")
        room = max(self.content_size.width - 6, 12)
        # The end of a long path says which file it is; its start is the run's log dir.
        head.append(plain(v.trace_path if len(v.trace_path) <= room else "…" + v.trace_path[-(room - 1):]))
        if v.artifact_url:
            head.append("\nartifact ", style="dim")
            # The name on screen, the whole URL behind it (a click opens it where terminals allow).
            link = v.artifact_url if "://" in v.artifact_url else None  # on the server (``artifact_url``)
            head.append(plain(v.artifact_url.rsplit("/", 1)[-1]), style=Style(underline=True, link=link))
        slowest = max(v.ranks, key=lambda r: r[1])[0] if len(v.ranks) > 1 else None
        for rank, wall_s, trace in v.ranks:  # every rank's trace of the window: open the slow one
            head.append(f"\nrank {rank} {wall_s:.2f}s ", style="bold yellow" if rank == slowest else "dim")
            head.append(plain(trace if len(trace) <= room else "…" + trace[-(room - 1):]))
        ops = ops_table(v.top_ops)  # the page's table too: one definition of its figures
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, expand=True, padding=(0, 0))
        table.add_column(ops.columns[0], ratio=1, no_wrap=True, overflow="ellipsis")
        for name in ops.columns[1:]:
            table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
        for row in ops.rows:
            table.add_row(run_text(row[0]), *row[1:])
        return Group(head, table)
