"""The run page names a chart's lines as the server shows a run's series (``leyline.run_keys``), in a real
headless Chromium: no ``rank`` on a run of one rank, each rank's on a run of several (rank 0's too)."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from leyline import Metrics, RunStarted, make_event
from tests.support import IngestClient
from tests.support.web import open_page

pytestmark = pytest.mark.single_backend


def _runs(url: str) -> None:
    async def send():
        for run_id, ranks in (("one", 1), ("two", 2)):
            for rank in range(ranks):
                async with IngestClient(url, run_id, rank=rank) as client:
                    events = [make_event(RunStarted(name=run_id, config={}, world_size=ranks), run_id=run_id, seq=1,
                                         ts=1.7e9, rank=rank)]
                    events += [make_event(Metrics(values={"loss": 1.0 / (step + 1) + rank}), run_id=run_id,
                                          seq=step + 2, ts=1.7e9 + step, rank=rank, step=step) for step in range(5)]
                    await client.send(events)
                    await client.wait_ack(events[-1].seq)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright's loop runs on this thread
        pool.submit(asyncio.run, send()).result(60)


def _names(page, run_id: str) -> list[str]:
    page.goto(page.url.split("#")[0] + f"#run={run_id}")
    chart = f'#charts[data-ready="1"] .chart[data-title="loss"][data-state="ready"][data-runs="{run_id}"]'
    page.wait_for_selector(chart)
    page.wait_for_function(f"document.querySelectorAll('{chart} .legend .entry').length > 0")
    return sorted(page.locator(f"{chart} .legend .entry .name").all_text_contents())


def test_a_lines_rank_is_named_only_where_its_run_has_several(browser, server_url):
    _runs(server_url)
    page, outside, errors = open_page(browser, server_url)
    page.goto(server_url + "/ui")
    assert _names(page, "two") == ["rank=0", "rank=1"], "each rank's line, rank 0's named too"
    assert _names(page, "one") == ["loss"], "a run of one rank: its line is the series itself"
    assert not outside and not errors
