"""The web page in a real headless Chromium (the system's, driven by Playwright): it loads with no
request leaving 127.0.0.1, shows the runs, a live run's chart gains points while we watch, the overlay
shows two runs, and with --read-auth it reads with the token (its websocket too). One browser for all."""

import asyncio
import threading

import httpx
import pytest

from leyline import RunStarted, make_event
from leyline.esper import EpochCompleted
from tests.e2e.api import wait_for
from tests.support.web import Feed, chart_titles, open_page

pytestmark = pytest.mark.single_backend
TOKEN = "web-page-token"


def _points(page, title):
    return int(page.locator(f'.chart[data-title="{title}"]').get_attribute("data-points") or 0)


def test_runs_charts_live_points_and_overlay(browser, server_url):
    with Feed(server_url, "done-b") as done:
        done.epochs(0, 12, acc=0.2)
    live = Feed(server_url, "live-a")
    try:
        live.epochs(0, 12, ppo=False)
        page, outside, errors = open_page(browser, server_url)
        index = httpx.get(server_url + "/").json()
        page.goto(server_url + index["ui"])
        page.wait_for_selector('tr[data-run-id="live-a"]')
        assert page.locator("#runs tbody tr").count() == 2
        assert "lr" in page.locator("#runs thead").inner_text(), "the config value that differs is a column"
        expect = pytest.importorskip("playwright.sync_api").expect
        page.click('#runs th[data-key="name"]')  # sorted by the server: the rows come back in its order
        expect(page.locator("#runs tbody tr").first).to_have_attribute("data-run-id", "done-b")
        page.click('#runs th[data-key="name"]')
        expect(page.locator("#runs tbody tr").first).to_have_attribute("data-run-id", "live-a")
        page.check('tr[data-run-id="live-a"] input')
        page.check('tr[data-run-id="done-b"] input')
        page.click("#overlay")
        page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="accuracy"][data-runs="done-b,live-a"]')

        page.goto(server_url + "/ui#run=live-a")
        page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="accuracy"][data-points="12"]')
        assert page.locator(".chart").count() == 1, "no PPO update yet: no chart of it"
        page.wait_for_selector("#live:not([hidden])")
        live.epochs(12, 6)
        page.wait_for_selector('.chart[data-title="accuracy"][data-points="18"]')
        page.wait_for_selector('.chart[data-title="policy loss"][data-points="6"]')  # its series appeared live
        page.wait_for_selector('.chart[data-title="explained variance"][data-points="6"]')  # the last to be added
        titles = page.locator(".chart").evaluate_all("els => els.filter(e => !e.hidden).map(e => e.dataset.title)")
        assert {"accuracy", "policy loss", "KL", "entropy", "explained variance"} <= set(titles)
        assert page.evaluate("window.nissa.view.markers.map(m => m.kind)") == ["fossilized"]

        page.goto(server_url + "/ui#run=done-b&overlay=live-a")
        page.wait_for_selector('.chart[data-title="accuracy"][data-runs="done-b,live-a"]')
        assert _points(page, "accuracy") == 18 + 12
        page.wait_for_selector("#live:not([hidden])")
        live.epochs(18, 2)  # a live run overlaid on a finished one still grows
        page.wait_for_selector(f'.chart[data-title="accuracy"][data-points="{20 + 12}"]')
        assert outside == [] and errors == []
        page.close()
    finally:
        live.close()


def _note(page, title):
    return page.locator(f'.chart[data-title="{title}"]').get_attribute("data-note")


def test_a_plain_loop_run_alone_and_beside_an_esper_run(browser, server_url, tmp_path):
    import math

    import nissa

    with Feed(server_url, "esper-x") as esper:
        esper.epochs(0, 8)
    run = nissa.init(server=server_url, run_name="loop", log_dir=tmp_path / "runs",
                     config={"rounds": 3, "batch": 64, "lr": 0.5},
                     system_metrics=False)
    try:
        for i in range(6):
            run.step()
            run.log({"loss": math.nan if i == 2 else 1.0 / (i + 1), "lr": 0.1})
        run.runtime.hub.flush(10)
        # The runs' summaries come from the series pass, about a second after their events; the table reads them once.
        wait_for(lambda: "lr" in httpx.get(f"{server_url}/runs/{run.run_id}").json().get("metrics", {}), 30,
                 "the run's summary")
        page, outside, errors = open_page(browser, server_url)
        page.goto(server_url + "/ui")
        page.wait_for_selector(f'tr[data-run-id="{run.run_id}"]')
        page.wait_for_selector('#runs th[data-key="lr.best"]')  # summarised by the server's next pass: refreshed
        heads = page.locator("#runs thead th").all_inner_texts()
        assert len(heads) == len(set(heads)), "a config value named like a column is not a second column"
        config = heads[heads.index("lr.best") + 1:heads.index("project")]
        assert config == ["lr", "batch", "policy", "rounds"], "values set differently first, then those a run lacks"
        assert heads[3:5] == ["loss.best", "lr.best"], "the loop's own metrics, not Esper's outcome"
        cells = page.locator('tr[data-run-id="esper-x"] td').all_inner_texts()
        assert cells[heads.index("loss.best")] == "" and cells[heads.index("rounds")] == "", "not the Esper run's"

        page.goto(server_url + f"/ui#run={run.run_id}")
        page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="loss"][data-points="6"]')
        assert chart_titles(page) == ["loss", "lr"], "its own metrics, no Esper charts"
        assert _note(page, "loss") == "1 NaN/inf"
        assert page.locator("#picker option").all_inner_texts()[:2] == ["loss", "lr"], "the picker's own first too"
        page.select_option("#axis", "round")  # a plain loop has no round
        page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="loss"][data-points="0"]')
        assert _note(page, "loss").startswith("no point of this series has a round")

        page.select_option("#axis", "step")
        page.goto(server_url + f"/ui#run=esper-x&overlay={run.run_id}")
        page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="accuracy"]')
        assert chart_titles(page)[:3] == ["loss", "lr", "accuracy"]
        assert _note(page, "loss").startswith("not in esper-x")
        acc = page.locator('.chart[data-title="accuracy"]')
        assert acc.get_attribute("data-runs") == "esper-x" and _note(page, "accuracy") == "not in loop", \
            "the run by its name"
        assert acc.get_attribute("data-marks") == "1", "esper-x's fossilized seed"
        assert page.locator('.chart[data-title="loss"]').get_attribute("data-marks") == "0", "none on a series it lacks"
        page.wait_for_selector("#live:not([hidden])")
        page.click('.chart[data-title="lr"] button[title="remove"]')  # removed: the next listing does not bring it back
        run.step()
        run.log({"val_loss": 0.5})  # a metric that first appears live gets its chart, after the others
        run.runtime.hub.flush(10)
        page.wait_for_selector('.chart[data-title="val_loss"][data-points="1"]')
        assert chart_titles(page)[:3] == ["loss", "val_loss", "accuracy"]
        page.select_option("#axis", "ts")  # overlaid on wall time: each run from its own start
        page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="accuracy"]')
        first_x = page.evaluate("window.nissa.view.charts.map(c => [c.title, c.plot.data[0][0]])")
        assert all(0 <= x < 60 for _, x in first_x), first_x
        assert outside == [] and errors == []
        page.close()
    finally:
        run.finish()


def test_with_read_auth_the_page_reads_with_the_token(browser, tmp_path):
    from tests.support.server import running_server

    with running_server(tmp_path, token=TOKEN, read_auth=True) as url:
        live = Feed(url, "guarded", token=TOKEN)
        try:
            live.epochs(0, 4)
            page, outside, errors = open_page(browser, url)
            page.goto(url + "/ui#run=guarded")
            page.wait_for_selector("#auth:not([hidden])")
            assert httpx.get(url + "/runs/guarded/series").status_code == 401
            page.fill("#token", TOKEN)
            page.click("#auth button")
            page.wait_for_selector('.chart[data-title="accuracy"][data-points="4"]')
            page.wait_for_selector("#live:not([hidden])")  # the websocket took the token too
            live.epochs(4, 2)
            page.wait_for_selector('.chart[data-title="accuracy"][data-points="6"]')
            assert outside == [] and errors == []
            page.close()
        finally:
            live.close()



def test_every_file_of_the_page_is_package_data():
    # A non-editable install carries only what pyproject.toml names: the page must not 404 there.
    import pathlib
    import tomllib

    root = pathlib.Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["nissa_server"]
    web = root / "nissa_server" / "web"
    files = [p.relative_to(root / "nissa_server").as_posix() for p in web.rglob("*") if p.is_file()]
    assert "web/vendor/uplot/LICENSE" in files and "web/index.html" in files
    def named(f: str, glob: str) -> bool:  # setuptools' globs: ``*`` stays within one folder
        path, pattern = pathlib.PurePosixPath(f), pathlib.PurePosixPath(glob)
        return len(path.parts) == len(pattern.parts) and path.match(glob)

    assert [f for f in files if not any(named(f, g) for g in globs)] == []
    from nissa_server.routes.web import _files

    expected = {"index.html", "app.js", "app.css", "vendor/uplot/uPlot.iife.min.js", "vendor/uplot/LICENSE"}
    assert expected <= set(_files())


def test_a_chart_reads_every_page_of_a_series_reply(browser, tmp_path):
    from tests.support import ingest_events
    from tests.support.server import running_server

    # A reply holds a page of bytes (here a few series); the page follows its Link to the rest.
    with running_server(tmp_path, max_page_bytes=3_000) as url:
        events = [make_event(RunStarted(name="paged", config={"policy": "ppo"}), run_id="paged", seq=1, ts=1.7e9,
                             step=0, epoch=0)]
        for epoch in range(4):
            for env in range(10):
                events.append(make_event(EpochCompleted(round=epoch, accuracy=0.1 * env, val_loss=1.0),
                                         run_id="paged", seq=len(events) + 1, ts=1.7e9 + len(events), step=16 * epoch,
                                         epoch=epoch, env=env))
        sent = threading.Thread(target=lambda: asyncio.run(ingest_events(url, events)))  # beside Playwright's loop
        sent.start()
        sent.join(60)
        reply = httpx.get(url + "/runs/paged/series/epoch_completed.accuracy")
        assert 'rel="next"' in reply.headers.get("link", "") and len(reply.json()["series"]) < 10
        page, outside, errors = open_page(browser, url)
        page.goto(url + "/ui#run=paged")
        page.wait_for_selector('.chart[data-title="accuracy"][data-points="40"]')
        assert outside == [] and errors == []
        page.close()
