"""Every view is a link (in Chromium): the runs table's filter, order, grouping, metric columns, selection and
parallel coordinates (coloured by the metric the table is sorted by) in the URL, and a run page's charts,
smoothing, x axis and zoom; opening the link in a fresh page restores the view."""

from __future__ import annotations

import httpx
import pytest

import nissa
from tests.e2e.api import wait_for
from tests.support.server import running_server
from tests.support.sweep import lr_sweep, store_runs
from tests.support.web import open_page

pytestmark = pytest.mark.single_backend


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("links")) as url:
        specs = lr_sweep()
        yield url, specs, store_runs(url, specs)


def _rows(page) -> list[str]:
    return page.locator("#runs tbody tr[data-run-id]").evaluate_all("els => els.map(e => e.dataset.runId)")


def _ready(page) -> None:
    page.wait_for_selector("#runs[data-ready] tbody tr")


def test_the_runs_tables_view_is_its_link(browser, sweep):
    url, specs, ids = sweep
    page, outside, errors = open_page(browser, url)
    page.goto(url + "/ui")
    _ready(page)
    page.fill("#filter", "config.lr>=0.01")
    page.press("#filter", "Enter")
    wait_for(lambda: len(_rows(page)) == 4, 30, "the filtered runs")
    page.click('#runs thead th[data-key="val_loss.best"]')
    page.click('#runs thead th[data-key="val_loss.best"]')  # again: highest first
    wait_for(lambda: page.evaluate("window.nissa.table.sort") == "-val_loss.best", 30, "sorted")
    order = wait_for(lambda: (rows := _rows(page)) and page.evaluate("window.nissa.table.seq") and rows, 30, "rows")
    picked = order[:2]
    for run_id in picked:
        page.check(f'tr[data-run-id="{run_id}"] input')
    page.click("#show-parcoords")
    page.wait_for_selector('#parcoords[data-lines="2"]')
    assert page.locator("#parcoords").get_attribute("data-colour") == "val_loss.best"  # the table's order
    link = page.url
    assert "sort=-val_loss.best" in link and "sel=" in link and "parcoords=" in link

    fresh, outside2, errors2 = open_page(browser, url)
    fresh.goto(link)
    _ready(fresh)
    wait_for(lambda: _rows(fresh) == _rows(page), 30, "the same rows in the same order")
    assert fresh.locator("#filter").input_value() == "config.lr>=0.01"
    assert sorted(fresh.evaluate("[...window.nissa.selected]")) == sorted(picked)
    assert all(fresh.locator(f'tr[data-run-id="{r}"] input').is_checked() for r in picked)
    fresh.wait_for_selector('#parcoords[data-lines="2"][data-colour="val_loss.best"]')

    fresh.select_option("#group-by", "config.lr")
    fresh.wait_for_selector("#runs tbody tr.group")
    grouped = fresh.url
    assert "by=config.lr" in grouped
    again, outside3, errors3 = open_page(browser, url)
    again.goto(grouped)
    again.wait_for_selector("#runs tbody tr.group")
    assert again.locator("#runs tbody tr.group").count() == 2  # lr 0.01 and 0.1
    assert not outside + outside2 + outside3 and not errors + errors2 + errors3


def test_a_run_pages_zoom_is_in_its_link(browser, server_url, tmp_path):
    run = nissa.init(server=server_url, run_name="zoomed", log_dir=tmp_path, system_metrics=False)
    for i in range(40):
        run.step()
        run.log({"loss": 1.0 / (i + 1)})
    run.finish()
    wait_for(lambda: len(httpx.get(f"{server_url}/runs/{run.run_id}/series/loss").json()["series"]) == 1, 30, "loss")
    page, outside, errors = open_page(browser, server_url)
    page.goto(server_url + f"/ui#run={run.run_id}&smooth=0.5")
    page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="loss"][data-state="ready"]')
    page.evaluate("window.nissa.view.zoom([10, 20])")  # what a drag across a chart does
    assert "zoom=10%2C20" in page.url and "smooth=0.5" in page.url
    fresh, outside2, errors2 = open_page(browser, server_url)
    fresh.goto(page.url)
    fresh.wait_for_selector('#charts[data-ready="1"] .chart[data-title="loss"][data-state="ready"]')
    assert fresh.evaluate("window.nissa.view.zoomed") == [10, 20]
    scale = fresh.evaluate("(() => { const c = window.nissa.view.charts.find(c => c.title === 'loss');"
                           " return [c.plot.scales.x.min, c.plot.scales.x.max]; })()")
    assert scale == [10, 20]
    assert fresh.locator("#smoothing").input_value() == "0.5"
    assert not outside + outside2 and not errors + errors2


def test_a_groups_charts_smooth_pick_their_x_axis_and_name_values_under_the_cursor(browser, sweep):
    url, specs, ids = sweep
    runs = [ids[s.name] for s in specs if s.lr == 0.01]
    page, outside, errors = open_page(browser, url)
    page.goto(url + "/ui#" + str(httpx.QueryParams({"group": "config.lr=0.01", "runs": ",".join(runs),
                                                     "metrics": "val_loss", "smooth": "0.5"})))
    chart = '#group-charts[data-ready="1"] .chart[data-title="val_loss"]'
    page.wait_for_selector(f"{chart} .legend[data-at='last']")
    assert page.locator("#group-smoothing").input_value() == "0.5"
    legend = page.locator(f"{chart} .legend")
    text = legend.inner_text()
    assert text.startswith("step ") and "mean " in text and "--" not in text
    box = page.locator(f"{chart} .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_selector(f"{chart} .legend[data-at='cursor']")
    assert "runs 2" in legend.inner_text() and "min " in legend.inner_text()
    page.select_option("#group-axis", "ts")
    page.wait_for_selector(f"{chart} .legend")
    assert "x=ts" in page.url and "smooth=0.5" in page.url
    assert not outside and not errors
