"""The console's System group: a run with system metrics charts the machine after the loop's own metrics;
no GPU chart where there are no GPU figures; a run without them shows no System chart."""

from __future__ import annotations

import nissa
from tests.tui.live_console import until
from tests.tui.test_plain_charts import shown
from tui.app import build_app
from tui.config import WatchConfig
from tui.screens.charts import ChartScreen


async def test_system_charts_follow_the_loops_own(tmp_path):
    run = nissa.init(run_name="sys", log_dir=tmp_path, system_metrics_s=0.05)
    for i in range(4):
        run.step()
        run.log({"loss": 1.0 / (i + 1)})
    run.finish()
    app = build_app(WatchConfig(client=None, replay_file=run.log_path, charts=True))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
        titles = await until(pilot, lambda: "System · CPU %" in shown(screen) and shown(screen), "System charts")
        assert titles[0] == "loss" and all(t.startswith("System · ") for t in titles[1:])
        assert {"System · memory %", "System · process RSS bytes"} <= set(titles)
        assert not [t for t in titles if "GPU" in t]  # this machine has no GPU figures
