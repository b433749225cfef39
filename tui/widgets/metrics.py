"""Numeric panels: the env grid, PPO health, gradient and LSTM health."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from leyline.esper import SeedStage, SlotSnapshot
from tui.format import num, pct, sparkline
from tui.safe_text import plain, run_text
from tui.views import EnvRow, HealthView, PPOView, Series

SPARK_WIDTH = 14
SLOT_WIDTH = 16
ALPHA_GLYPHS = " ▁▂▃▄▅▆▇█"
BLUEPRINT_SHORT = {"norm": "norm", "attention": "attn", "depthwise": "dpth", "bottleneck": "botl",
                   "conv_small": "cv-s", "conv_light": "cv-l", "conv_heavy": "cv-h"}
"""Four characters per blueprint in the env grid (an unknown one shows its first four)."""
HEAD_LABEL = {"blueprint": "bp", "alpha_target": "α-tgt", "alpha_speed": "α-spd", "alpha_curve": "α-crv"}
STAGE_STYLE = {
    SeedStage.GERMINATED: ("GERM", "cyan"),
    SeedStage.TRAINING: ("TRAIN", "blue"),
    SeedStage.BLENDING: ("BLEND", "magenta"),
    SeedStage.HOLDING: ("HOLD", "yellow"),
    SeedStage.FOSSILIZED: ("FOSSL", "bold green"),
    SeedStage.PRUNED: ("PRUNE", "red"),
    SeedStage.EMBARGOED: ("EMBGO", "dim red"),
    SeedStage.RESETTING: ("RESET", "dim"),
    SeedStage.DORMANT: ("DORM", "dim"),
}


def _table(*columns: str | Text) -> Table:
    # One space between columns: the grid must fit three slots in a 120-column terminal.
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, expand=True, padding=(0, 0))
    for name in columns:
        table.add_column(name, no_wrap=True, overflow="ellipsis")
    return table


def contribution_pp(contribution: float) -> str:
    """A counterfactual contribution in accuracy points, four characters: ``+1.2``, ``-0.4``, ``+12``."""
    pp = 100.0 * contribution
    return f"{pp:+.1f}" if abs(pp) < 9.95 else f"{pp:+.0f}"


def slot_cell(seed: SlotSnapshot) -> Text:
    """``BLEND▅ attn +1.2``: stage (colored), alpha as a bar while it moves, blueprint, and the
    seed's measured contribution in accuracy points (green when it helps, red when it hurts)."""
    if seed.stage is None:
        return Text("·", style="dim")
    code, style = STAGE_STYLE.get(seed.stage, (seed.stage.value[:5], ""))
    text = Text(f"{code:<5}", style=style)
    moving = seed.stage is SeedStage.BLENDING or 0 < seed.alpha < 1
    text.append(ALPHA_GLYPHS[round(seed.alpha * 8)] if moving else " ", style=style)
    if seed.blueprint:
        text.append(plain(f"{BLUEPRINT_SHORT.get(seed.blueprint, seed.blueprint[:4]):<4}"))
    if seed.contribution is not None:
        c = seed.contribution
        text.append(f" {contribution_pp(c)}", style="green" if c > 0.0005 else "red" if c < -0.0005 else "dim")
    return text


class EnvGrid(Static):
    """Per env: accuracy with its sparkline, the last reward, and each slot's seed."""

    rows: reactive[tuple[EnvRow, ...]] = reactive((), layout=True)

    def render(self) -> RenderableType:
        if not self.rows:
            return Text("waiting for the first epoch…", style="dim")
        widest = max(self.rows, key=lambda r: len(r.seeds))
        # The sparkline takes whatever the fixed columns leave; reward goes first when narrow.
        room = self.content_size.width - (SLOT_WIDTH + 1) * len(widest.seeds)
        with_reward = room - 4 - 6 - 7 >= 8
        trend = max(4, min(SPARK_WIDTH * 2, room - 4 - 6 - 1 - (7 if with_reward else 0)))
        table = _table("env", "acc", "trend", *(("reward",) if with_reward else ()),
                       *(run_text(s.slot) for s in widest.seeds))
        for r in self.rows:
            acc = r.accuracy[-1] if r.accuracy else None
            cells: list[RenderableType] = [str(r.env), pct(acc).strip(),
                                           Text(sparkline(r.accuracy, trend), style="green")]
            if with_reward:
                cells.append(num(r.reward))
            table.add_row(*cells, *(slot_cell(s) for s in r.seeds))
        return table


def _series_table(series: tuple[Series, ...], title: str) -> Table:
    flags = any(s.flag for s in series)
    table = _table(run_text(title), "last", "trend", *(("",) if flags else ()))
    for s in series:
        cells: list[RenderableType] = [run_text(s.name), num(s.latest, 4),
                                       Text(sparkline(s.values, SPARK_WIDTH), style="cyan")]
        if flags:
            cells.append(Text(s.flag, style="bold red"))
        table.add_row(*cells)
    return table


class PPOPanel(Static):
    """Losses, KL, clip fraction, explained variance, grad norm and entropy (mean and per head)."""

    view: reactive[PPOView | None] = reactive(None, layout=True)

    def render(self) -> RenderableType:
        v = self.view
        if v is None or not v.series[0].values:
            return Text("no PPO update yet (heuristic policy, or before the first round)", style="dim")
        table = _series_table(v.series, f"round {v.round}" + (" early-stop" if v.early_stopped else ""))
        heads = Text("entropy/head ", style="dim")
        for name, value in v.heads:
            heads.append(plain(f"{HEAD_LABEL.get(name, name)} "), style="dim")
            heads.append(f"{value:.2f}  ")
        return Group(table, heads)


class HealthPanel(Static):
    """Gradient norm per scope and the policy LSTM's state norms, flagged when unhealthy."""

    view: reactive[HealthView | None] = reactive(None, layout=True)

    def render(self) -> RenderableType:
        v = self.view
        if v is None or not (v.grads or v.lstm):
            return Text("no gradient or LSTM health yet", style="dim")
        return _series_table(v.grads + v.lstm, "scope")
