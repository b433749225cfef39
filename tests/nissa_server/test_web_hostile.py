"""The web page in a real headless Chromium, on runs whose every text is hostile (HTML, console markup, terminal
sequences) and whose stored start is no date a browser holds (ts 8.7e12, 1e300, stored by a server of before the
ingest rules): every run is listed (none stops the table), no script runs, no request leaves the server."""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support import ingest_events, running_server
from tests.support.clients import events_for
from tests.support.hostile import MARKER, as_stored_long_ago, hostile_events
from tests.support.web import open_page

pytestmark = pytest.mark.single_backend  # the store is rewritten as SQLite holds it


@pytest.fixture
def stored(tmp_path):
    """A store with two hostile runs started at impossible times beside two plain ones."""
    db = tmp_path / "nissa.db"

    async def ingest(url: str) -> None:
        for run_id in ("evil-a", "evil-b"):
            await ingest_events(url, hostile_events(run_id, Path("/x"), server_alerts=False))
        for run_id in ("calm-1", "calm-2"):
            await ingest_events(url, events_for(run_id, 5, started=True))

    with running_server(tmp_path, db_path=db) as url, ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, ingest(url)).result(60)  # playwright's loop holds this thread
    as_stored_long_ago(db, {"evil-a": 8.7e12, "evil-b": 1e300})
    return db


def test_hostile_runs_and_impossible_starts_are_listed_and_shown_as_text(browser, tmp_path, stored):
    from playwright.sync_api import expect

    with running_server(tmp_path, db_path=stored) as url:
        page, outside, errors = open_page(browser, url)
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url + httpx.get(url + "/").json()["ui"])
        page.wait_for_selector("#runs tbody tr")
        expect(page.locator("#runs tbody tr")).to_have_count(4, timeout=10_000)  # a row it stopped at hides the rest
        ids = page.locator("#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.runId)")
        assert sorted(ids) == ["calm-1", "calm-2", "evil-a", "evil-b"]
        name = page.locator('tr[data-run-id="evil-a"] td').nth(1).inner_text()
        assert "[@click=app.screenshot(" in name, "the run's name, shown as it was written"
        assert page.locator("#runs tbody script, #runs tbody img").count() == 0
        for run_id in ("evil-a", "evil-b"):
            page.goto(f"{url}/ui#run={run_id}")
            page.wait_for_selector('#charts[data-ready="1"] .chart')
            page.wait_for_timeout(300)  # an injected handler would have run by now
        assert page.evaluate(f"window.{MARKER}") is None, "a script of the run's ran"
        assert dialogs == [] and errors == [] and outside == []
        page.close()
