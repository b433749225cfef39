"""The web page's runs table in a real headless Chromium against a real server holding a stored sweep
(three learning rates, two seeds each, one group): metric and config columns, the server's sort and
filter, pages, rows of groups with mean ± SD that open into their runs, a group's band chart, the diff of
three configs, parallel coordinates, and editing tags through PATCH."""

import statistics

import httpx
import pytest

from tests.support.server import running_server
from tests.support.sweep import SweepRun, lr_sweep, store_runs
from tests.support.web import open_page

pytestmark = pytest.mark.single_backend  # the page; the API under it is tested on both stores
TOKEN = "runs-table-token"


def _best(spec: SweepRun) -> float:
    return min(spec.val_loss(step) for step in range(spec.steps))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    with running_server(tmp, token=TOKEN) as url:
        specs = [*lr_sweep(), SweepRun("other", 0.5, project="mnist", steps=3)]
        yield url, specs, store_runs(url, specs, token=TOKEN)


def _names(page):
    return page.locator("#runs tbody tr[data-run-id] td:nth-child(2) a").all_inner_texts()


def expect(locator):
    return pytest.importorskip("playwright.sync_api").expect(locator)


def _wait_table(page, rows):
    expect(page.locator("#runs tbody tr")).to_have_count(rows)  # (the page's CSP allows no evaluated strings)


def _first(page, run_id):
    expect(page.locator("#runs tbody tr").first).to_have_attribute("data-run-id", run_id)


def test_columns_sort_filter_and_pages_are_the_servers(browser, sweep):
    url, specs, ids = sweep
    page, outside, errors = open_page(browser, url)
    page.goto(url + "/ui")
    _wait_table(page, 7)
    head = page.locator("#runs thead").inner_text()
    assert "val_loss.best" in head and "loss.best" in head and "lr" in head and "seed" in head
    page.click('#runs th[data-key="val_loss.best"]')
    page.wait_for_selector('#runs th[data-key="val_loss.best"]:has-text("▲")')
    ranked = sorted(specs, key=_best)
    _first(page, ids[ranked[0].name])
    assert _names(page) == [s.name for s in ranked]
    page.click('#runs th[data-key="val_loss.best"]')
    _first(page, ids[ranked[-1].name])
    page.select_option("#field", "last")
    page.wait_for_selector('#runs th[data-key="val_loss.last"]')
    page.fill("#filter", "config.lr>=0.01 project:cifar")
    page.press("#filter", "Enter")
    _wait_table(page, 4)
    assert page.locator("#page").inner_text() == "1–4 of 4"
    page.fill("#filter", "config.lr>=")
    page.press("#filter", "Enter")
    expect(page.locator("#error")).to_contain_text("400")
    page.fill("#filter", "")
    page.press("#filter", "Enter")
    _wait_table(page, 7)
    assert outside == [] and errors == []


def test_group_rows_open_into_runs_and_chart_their_band(browser, sweep):
    url, specs, ids = sweep
    page, outside, errors = open_page(browser, url)
    page.goto(url + "/ui")
    _wait_table(page, 7)
    page.select_option("#group-by", "config.lr")
    page.wait_for_selector("#runs tr.group")
    groups = page.locator("#runs tr.group")
    assert groups.count() == 4  # 0.001, 0.01, 0.1 and the other project's 0.5
    row = page.locator('#runs tr.group[data-group="0.01"]')
    assert "2 runs" in row.inner_text()
    bests = [_best(s) for s in specs if s.lr == 0.01]
    mean, sd = statistics.fmean(bests), statistics.stdev(bests)
    assert f"{float(f'{mean:.4g}')} ± {float(f'{sd:.2g}')}" in row.inner_text()
    row.locator("button.toggle").click()
    page.wait_for_selector("#runs tr.member")
    assert sorted(page.locator("#runs tr.member").evaluate_all("els => els.map(e => e.dataset.runId)")) == sorted(
        ids[s.name] for s in specs if s.lr == 0.01)
    row.locator("a.bands").click()
    page.wait_for_selector('#group-charts[data-ready="1"] .chart[data-title="val_loss"]')
    chart = page.locator('.chart[data-title="val_loss"]')
    assert chart.get_attribute("data-runs") == "2" and int(chart.get_attribute("data-points")) == specs[0].steps
    assert page.locator("#group-charts canvas").count() >= 2  # uPlot drew the band and the line
    assert outside == [] and errors == []


def test_diff_parallel_coordinates_and_editing_tags(browser, sweep):
    url, specs, ids = sweep
    page, outside, errors = open_page(browser, url)
    page.goto(url + "/ui")
    _wait_table(page, 7)
    three = [ids[s.name] for s in specs if s.seed == 0 and s.project == "cifar"]
    for run_id in three:
        page.check(f'tr[data-run-id="{run_id}"] input')
    page.click("#show-parcoords")
    page.select_option("#parcoords-metric", label="val_loss.best")
    page.wait_for_selector('#parcoords[data-lines="3"][data-axes$="val_loss.best"]')
    assert page.locator("#parcoords").get_attribute("data-axes") == "config.lr,val_loss.best"
    lines = page.evaluate("window.nissa.parcoords.lines.map(l => [l.name, l.points[0][1], l.points[1][1]])")
    by_lr = {name: (y_lr, y_metric) for name, y_lr, y_metric in lines}
    # Higher is up (smaller y on the canvas): the largest lr tops the lr axis and, best, is lowest on the metric's.
    assert by_lr["lr0.1-s0"][0] < by_lr["lr0.01-s0"][0] < by_lr["lr0.001-s0"][0]
    assert by_lr["lr0.1-s0"][1] > by_lr["lr0.01-s0"][1] > by_lr["lr0.001-s0"][1]
    assert page.evaluate("window.nissa.parcoords.axes[0].kind") == "log"

    page.click("#diff")
    page.wait_for_selector('#diff-view[data-ready="1"]')
    assert page.locator("#diff-table thead th").count() == 4
    assert page.locator("#diff-table tbody tr").evaluate_all("els => els.map(e => e.dataset.key)") == ["lr"]

    page.goto(url + "/ui")
    _wait_table(page, 7)
    target = ids["lr0.1-s0"]
    page.click(f'tr[data-run-id="{target}"] button.edit')
    page.fill("#edit-tags", "best, baseline")
    page.fill("#edit-notes", "<b>not bold</b>")
    page.click('#editor-form button[type="submit"]')
    page.wait_for_selector("#token")  # the server has a token: the page asks for it
    page.fill("#token", TOKEN)
    page.click('#auth button[type="submit"]')
    _wait_table(page, 7)
    page.click(f'tr[data-run-id="{target}"] button.edit')
    page.fill("#edit-tags", "best, baseline")
    page.fill("#edit-notes", "<b>not bold</b>")
    page.click('#editor-form button[type="submit"]')
    page.wait_for_selector(f'tr[data-run-id="{target}"] td:has-text("best baseline")')
    run = httpx.get(f"{url}/runs/{target}").json()
    assert run["tags"] == ["best", "baseline"] and run["notes"] == "<b>not bold</b>"
    assert page.locator(f'tr[data-run-id="{target}"] b').count() == 0
    assert outside == [] and errors == []


def _head_keys(page):
    return page.locator("#runs thead th[data-col]").evaluate_all("els => els.map(e => e.dataset.key)")


def test_the_page_shows_the_columns_the_server_serves_with_the_page(browser, sweep):
    """The page computes no column of its own: it shows the metric columns (by name) and config keys
    ``GET /runs-table`` serves (``leyline.runs_table``, the console's rule), and what it is served instead if that
    changes."""
    url, _, _ = sweep
    served = httpx.get(url + "/runs-table", params={"limit": 100, "offset": 0}).json()
    columns = served["columns"]
    assert columns["metrics"] and columns["params"], columns
    frame = ["name", "status"], ["project", "group", "tag", "started", ""]
    page, outside, errors = open_page(browser, url)
    page.goto(url + "/ui")
    _wait_table(page, 7)
    assert _head_keys(page) == [*frame[0], *(f"{k}.best" for k in columns["metrics"]),
                                *(f"config.{k}" for k in columns["params"]), *frame[1]]

    def other_columns(route):
        reply = route.fetch()
        body = reply.json()
        body["columns"] = {**body["columns"], "metrics": ["served.name"], "params": ["optimizer"]}
        route.fulfill(response=reply, json=body)

    other, outside_too, errors_too = open_page(browser, url)
    other.route("**/runs-table?**", other_columns)
    other.goto(url + "/ui")
    _wait_table(other, 7)
    assert _head_keys(other) == [*frame[0], "served.name.best", "config.optimizer", *frame[1]]
    assert outside + outside_too == [] and errors + errors_too == []
