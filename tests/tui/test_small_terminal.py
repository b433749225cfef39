"""At 100×30 the right column's lower panels (commands, profile) are one key away, not nine Tabs."""

from __future__ import annotations

from textual.containers import VerticalScroll

from tests.support.server import running_server
from tests.tui.live_console import console, until
from tests.tui.producer import scripted_trainer
from tests.tui.scenario import scripted_run
from tui.screens.run_view import RunViewScreen


def _in_view(right: VerticalScroll, panel_id: str) -> bool:
    panel = right.query_one(f"#{panel_id}").virtual_region
    return right.scroll_y <= panel.y and panel.bottom <= right.scroll_y + right.size.height


async def test_n_brings_each_panel_of_the_right_column_into_view(tmp_path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-small") as trainer:
            await trainer.send(scripted_run("run-small", epochs=4, finish=False))
            app = console(url, run_id="run-small")
            async with app.run_test(size=(100, 30)) as pilot:
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
                await until(pilot, lambda: view.state.events_total == trainer.seq, "events")
                right = view.query_one("#right", VerticalScroll)
                assert not _in_view(right, "profile"), "the terminal is tall enough: nothing to show here"
                seen: list[str] = []
                tops = []
                for _ in range(6):
                    await pilot.press("n")
                    await pilot.pause()
                    tops.append(right.scroll_y)
                    seen += [p for p in ("commands", "profile") if _in_view(right, p) and p not in seen]
                assert sorted(seen) == ["commands", "profile"], seen
                assert 0 in tops and max(tops) == right.max_scroll_y > 0, tops  # down the column, then back up
