"""The web page's runs table over a run of one rank and a run of two, in a real headless Chromium: one
``val_loss.best`` column holding both runs' values (rank 0's of the run of two: ``leyline.runs_table``), sorted as
one; an older link's ``col=val_loss{rank=0}`` is that column; another rank's column still comes when asked."""

import urllib.parse

import pytest

from tests.support.server import running_server
from tests.support.sweep import best_text, mixed_ranks, store_runs
from tests.support.web import open_page

pytestmark = pytest.mark.single_backend
RUNS = mixed_ranks()


def expect(locator):
    return pytest.importorskip("playwright.sync_api").expect(locator)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("ranks")) as url:
        yield url, store_runs(url, RUNS)


def _cells(page, key: str) -> dict[str, str]:
    """Each run's cell of the column sorted by ``key``, by run id, in the table's order."""
    at = page.locator("#runs thead th[data-col]").evaluate_all(
        f"els => els.findIndex(e => e.dataset.key === {key!r})") + 2  # the selection's cell, then 1-based
    rows = page.locator("#runs tbody tr[data-run-id]")
    return {row.get_attribute("data-run-id"): row.locator(f"td:nth-child({at})").inner_text()
            for row in rows.all()}


def _metric_keys(page) -> list[str]:
    return page.locator("#runs thead th[data-col]").evaluate_all(
        "els => els.map(e => e.dataset.key).filter(k => k.endsWith('.best'))")


def test_runs_of_one_and_of_two_ranks_share_one_val_loss_column(browser, mixed):
    url, ids = mixed
    one, two = RUNS
    page, outside, errors = open_page(browser, url)
    page.goto(url + "/ui")
    expect(page.locator("#runs tbody tr[data-run-id]")).to_have_count(2)
    assert _metric_keys(page) == ["loss.best", "val_loss.best"], "no val_loss{rank=0}.best beside it"
    assert _cells(page, "val_loss.best") == {ids["two"]: best_text(two), ids["one"]: best_text(one)}
    page.click('#runs th[data-key="val_loss.best"]')
    expect(page.locator("#runs tbody tr").first).to_have_attribute("data-run-id", ids["two"])
    page.click('#runs th[data-key="val_loss.best"]')
    expect(page.locator("#runs tbody tr").first).to_have_attribute("data-run-id", ids["one"])
    assert list(_cells(page, "val_loss.best")) == [ids["one"], ids["two"]], "sorted as one column"
    assert outside == [] and errors == []


@pytest.mark.parametrize("col", ["val_loss{rank=0}", "val_loss"])
def test_a_link_naming_rank_0s_column_shows_the_one_column(browser, mixed, col):
    url, ids = mixed
    page, outside, errors = open_page(browser, url)
    page.goto(url + "/ui#" + urllib.parse.urlencode({"q": "name:one", "col": col}))
    page.wait_for_selector('#runs th[data-key="val_loss.best"]')
    expect(page.locator("#runs tbody tr[data-run-id]")).to_have_count(1)
    assert _cells(page, "val_loss.best") == {ids["one"]: best_text(RUNS[0])}
    assert _metric_keys(page) == ["val_loss.best"]
    page.wait_for_function("location.hash.includes('col=val_loss&') || location.hash.endsWith('col=val_loss')")
    assert outside == [] and errors == []


def test_another_ranks_column_comes_when_asked(browser, mixed):
    url, ids = mixed
    page, outside, errors = open_page(browser, url)
    page.goto(url + "/ui#" + urllib.parse.urlencode([("col", "val_loss"), ("col", "val_loss{rank=1}")]))
    page.wait_for_selector('#runs th[data-key="val_loss{rank=1}.best"]')
    expect(page.locator("#runs tbody tr[data-run-id]")).to_have_count(2)
    assert _cells(page, "val_loss{rank=1}.best") == {ids["two"]: best_text(RUNS[1], 1), ids["one"]: ""}
    assert _cells(page, "val_loss.best") == {ids["two"]: best_text(RUNS[1]), ids["one"]: best_text(RUNS[0])}
    assert outside == [] and errors == []
