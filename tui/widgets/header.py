"""The run header and the anomalies strip: the two lines an operator reads first."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from tui.format import num
from tui.safe_text import plain, run_text
from tui.views import AnomalyRow, HeaderView

STALENESS_STYLE = {
    "LIVE": "bold black on green",
    "SLOW": "bold black on yellow",
    "STALE": "bold white on red",
    "LOST": "bold white on red",
    "FINISHED": "bold white on blue",
    "REPLAY": "bold white on magenta",
    "WAITING": "bold white on grey37",
}
LEVEL_STYLE = {"DEBUG": "bold magenta", "OFF": "dim", "MINIMAL": "cyan", "NORMAL": "green"}
CONNECTION_STYLE = {"connected": "green", "replay": "magenta", "unauthorized": "bold red"}


class RunHeader(Static):
    """Run, status, round and epoch, rate; telemetry level and what the seeds grew; hub and stream health.
    A plain loop's run in its own words: step, its epoch if it has one, steps/s and its headline metrics."""

    DEFAULT_CSS = """
    RunHeader { height: 3; padding: 0 1; background: $boost; }
    """

    view: reactive[HeaderView | None] = reactive(None)

    def render(self) -> RenderableType:
        v = self.view
        if v is None:
            return Text("no run selected", style="dim")
        first = Text()
        first.append(f" {v.staleness} ", style=STALENESS_STYLE.get(v.staleness, "bold"))
        first.append(plain(f"  {v.run_id}"), style="bold")
        if v.name:
            first.append(plain(f" ({v.name})"))
        if v.plain:
            first.append_text(_plain_line(v))
            second = _headline(v)
        else:
            first.append(plain(f"   status {v.status or '—'}   round {v.round}   epoch {v.epoch}   step {v.step}"))
            first.append(f"   {num(v.rate, 1)} env-epochs/s")
            second = Text()
        if not v.plain or v.level != "—":
            second.append_text(_telemetry(v))
        third = Text()
        if v.hub_queue is None:
            third.append("trainer hub —")
        else:
            third.append(f"trainer hub: queue {v.hub_queue}, drops ")
            third.append(str(v.hub_drops), style="bold red" if v.hub_drops else "")
            third.append(f", reconnects {v.hub_reconnects}")
            if v.hub_connected is False:
                third.append(" (trainer offline)", style="yellow")
        third.append("   console stream: ")
        third.append(v.connection, style=CONNECTION_STYLE.get(v.connection, "yellow"))
        third.append(f", {v.events:,} events, reconnects {v.watch_reconnects}")
        if v.gaps:
            third.append(f", gaps {v.gaps}", style="bold red")
        if v.token_refused:
            third.append("   token refused: commands will fail (--token)", style="bold red")
        return Text("\n").join([first, second, third])


def _plain_line(v: HeaderView) -> Text:
    """A plain loop's run in its own words: its step, its epoch when it has its own, its steps a second."""
    line = run_text(f"   status {v.status or '—'}   step {v.step}")
    if v.has_epochs:
        line.append(f"   epoch {v.epoch}")
    line.append(f"   {num(v.steps_per_s, 1)} steps/s")
    return line


def _headline(v: HeaderView) -> Text:
    """The run's headline metrics, their last values as the loop logged them."""
    if not v.headline:
        return Text("no metrics yet", style="dim")
    line = Text()
    for i, (name, value) in enumerate(v.headline):
        line.append("   " if i else "")
        line.append_text(run_text(name, "bold"))
        line.append(" ")
        line.append_text(run_text(value))
    return line


def _telemetry(v: HeaderView) -> Text:
    """The telemetry level (and until when) and, on an Esper run, what the seeds grew."""
    second = Text("   telemetry " if v.plain else "telemetry ")
    second.append(v.level, style=LEVEL_STYLE.get(v.level, ""))
    if v.level_until is not None and v.level == "DEBUG":
        second.append(f" until {'epoch' if v.has_epochs else 'step'} {v.level_until}")
    if v.growth is not None:
        g = v.growth
        second.append("   growth ")
        second.append(f"{g.fossilized} fossilized", style="bold green" if g.fossilized else "dim")
        second.append(f", +{g.params:,} params ({g.percent:+.1f}% of host)")
    return second


class AnomalyStrip(Static):
    """The latest anomalies on one line, newest first; quiet when there are none."""

    DEFAULT_CSS = """
    AnomalyStrip { height: 1; padding: 0 1; }
    AnomalyStrip.-alert { background: $error 30%; }
    """

    rows: reactive[tuple[AnomalyRow, ...]] = reactive(())

    def watch_rows(self, rows: tuple[AnomalyRow, ...]) -> None:
        self.set_class(bool(rows), "-alert")

    def render(self) -> RenderableType:
        if not self.rows:
            return Text("no anomalies", style="dim")
        out = Text(f"⚠ {len(self.rows)} anomalies: ", style="bold")
        for i, a in enumerate(self.rows[:4]):
            if i:
                out.append("  │  ", style="dim")
            where = f"e{a.epoch}" + (f"/env{a.env}" if a.env is not None else "")
            out.append(plain(a.anomaly), style="bold yellow")
            out.append(plain(f" {where} {a.detail}") + (" [auto-escalated]" if a.auto else ""))
        out.truncate(max(self.size.width, 20), overflow="ellipsis")
        return out
