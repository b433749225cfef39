"""Which client's own panels a run's page shows is the server's to say (``RunDetail.panels``, by
``leyline.panels.client_panels``) and the page renders what it is given, in Chromium: an Esper run that has so far
made only seed decisions (no epoch report, no PPO update yet) has Esper's panels, its update to debug through and
its checkpointing stop; a plain loop's run has none of them; the console says the same of the same events. A page
opened before the run's first such event gets them when it comes."""

from __future__ import annotations

import httpx
import pytest

from leyline import Metrics, decode_events
from leyline.esper import SeedGerminated, SeedStage, SeedStageChanged
from leyline.esper.panels import PANELS
from leyline.panels import client_panels
from leyline.steering import STOP_ESPER, STOP_LOOP
from tests.support.web import Feed, open_page
from tui.state import RunState

pytestmark = pytest.mark.single_backend


def _said(server_url, run_id):
    """The run's panels as the server serves them, and as the console folds its events."""
    detail = httpx.get(f"{server_url}/runs/{run_id}", timeout=10).json()
    console = RunState(run_id)
    console.apply_all(decode_events(httpx.get(f"{server_url}/runs/{run_id}/events", timeout=10).content))
    return detail["panels"], console.panels


def _stop_text(page):
    page.click('form[data-action="stop"] button[type="submit"]')
    text = page.locator("#stop-confirm p").text_content()
    page.click('#stop-confirm button[data-answer="no"]')
    return text


def test_the_page_shows_the_client_panels_the_server_says(browser, server_url):
    with Feed(server_url, "seeds-first") as esper, Feed(server_url, "own-loop") as plain:
        esper.start({"policy": "heuristic"})
        esper.send([(SeedGerminated(slot="r0c0", seed_id="s1", blueprint="conv", params=90), 0, 0),
                    (SeedStageChanged(slot="r0c0", seed_id="s1", from_stage=SeedStage.GERMINATED,
                                      to_stage=SeedStage.TRAINING), 0, 0)])
        plain.start({"lr": 0.1})
        plain.send([(Metrics(values={"loss": 1.0 / (i + 1)}), i, None) for i in range(3)])
        assert _said(server_url, "seeds-first") == ([PANELS], [PANELS]) == (client_panels({"seed_germinated"}),) * 2
        assert _said(server_url, "own-loop") == ([], [])

        page, outside, errors = open_page(browser, server_url)
        page.goto(f"{server_url}/ui#run=seeds-first")
        page.wait_for_selector('#esper[data-ready="1"]')
        assert page.locator("#seed-log tbody tr td:nth-child(5)").all_text_contents() == [
            "GERMINATED → TRAINING", "germinated conv (90 params)"]
        assert page.locator('form[data-action="debug"] [name="through_update"]').count() == 1
        assert _stop_text(page) == STOP_ESPER

        page.goto(f"{server_url}/ui#run=own-loop")
        page.wait_for_selector('#steer[data-ready="1"] form[data-action="stop"]')
        page.wait_for_selector('.chart[data-title="loss"]')
        assert page.locator("#esper").count() == 0
        assert page.locator('form[data-action="debug"] [name="through_update"]').count() == 0
        assert _stop_text(page) == STOP_LOOP
        assert not outside and not errors, (outside, errors)
        page.close()


def test_a_page_opened_before_the_runs_first_esper_event_gets_its_panels_when_it_comes(browser, server_url):
    with Feed(server_url, "first-epoch") as esper:
        esper.start({"policy": "ppo"})
        page, outside, errors = open_page(browser, server_url)
        page.goto(f"{server_url}/ui#run=first-epoch")
        page.wait_for_selector('#steer[data-ready="1"] form[data-action="debug"]')
        assert page.locator("#esper").count() == 0
        assert page.locator('form[data-action="debug"] [name="through_update"]').count() == 0
        page.fill('form[data-action="stacks"] [name="reason"]', "kept")
        esper.send([(SeedGerminated(slot="r0c0", seed_id="s1", blueprint="conv", params=90), 0, 0)])
        page.wait_for_selector('#esper[data-ready="1"]')
        page.wait_for_selector('form[data-action="debug"] [name="through_update"]')
        assert page.locator('form[data-action="profile"] [name="target"]').count() == 1
        assert page.locator('form[data-action="stacks"] [name="reason"]').input_value() == "kept"
        assert page.locator("#esper").count() == 1
        assert _stop_text(page) == STOP_ESPER
        assert not outside and not errors, (outside, errors)
        page.close()
