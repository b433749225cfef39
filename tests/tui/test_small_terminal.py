"""At 100×30 the right column's lower panels (commands, profile) are one key away, not nine Tabs."""

from __future__ import annotations

from textual.containers import VerticalScroll

from tests.tui.live_console import live_run, run_view, until


def _in_view(right: VerticalScroll, panel_id: str) -> bool:
    panel = right.query_one(f"#{panel_id}").virtual_region
    return right.scroll_y <= panel.y and panel.bottom <= right.scroll_y + right.size.height


async def test_n_brings_each_panel_of_the_right_column_into_view(tmp_path):
    async with (live_run(tmp_path, "run-small", epochs=4) as (url, trainer),
                run_view(url, "run-small", size=(100, 30)) as (app, pilot, view)):
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
