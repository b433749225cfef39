"""Esper's charts, registered in the chart list (``leyline.charts``) as its kinds are in the kinds table: what an
Esper run is watched by (its accuracy, the PPO update's figures, how fast its envs train), and what a heuristic
policy's run cannot have. Each series is named from its payload's field (``series_of``), so a renamed field fails
here, not on a page that stays blank. A plain loop's run has none of these series, so it shows none of them."""

from __future__ import annotations

from leyline.chart_spec import ChartDef, Unavailable, series_of
from leyline.esper.policy import PPOUpdate
from leyline.esper.seeds import EpochCompleted
from leyline.payloads_ops import PhaseTiming

ESPER_CHARTS: tuple[ChartDef, ...] = (
    ChartDef("accuracy", (series_of(EpochCompleted, "accuracy"),)),
    ChartDef("return", (series_of(PPOUpdate, "episode_return"),)),
    ChartDef("policy loss", (series_of(PPOUpdate, "policy_loss"),), higher_is_better=False),
    ChartDef("value loss", (series_of(PPOUpdate, "value_loss"),), higher_is_better=False),
    ChartDef("KL", (series_of(PPOUpdate, "approx_kl"),), higher_is_better=False),
    ChartDef("entropy", (series_of(PPOUpdate, "entropy", "*"),)),
    ChartDef("explained variance", (series_of(PPOUpdate, "explained_variance"),)),
    ChartDef("env-epochs/s", (series_of(PhaseTiming, "env_epochs_per_s"),)),
)
"""What an Esper run is watched by, in this order."""

ESPER_UNAVAILABLE: tuple[Unavailable, ...] = (
    Unavailable("policy", "heuristic", series_of(PPOUpdate),
                "a heuristic policy makes no PPO update: no return, losses, KL, entropy or explained variance"),
)
"""What an Esper run's policy (its config's ``policy``) cannot have."""

__all__ = ["ESPER_CHARTS", "ESPER_UNAVAILABLE"]
