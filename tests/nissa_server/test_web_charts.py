"""One definition of what to chart (``leyline.charts``): the server serves it to the web page, the console
imports it, and both chart the same things under the same titles, in the same order."""

from __future__ import annotations

import importlib.resources

import httpx
import pytest

from leyline import RunStatus, RunSummary, charts, runs_table
from tests.support.web import Feed, chart_titles, open_page
from tui.screens import charts as chart_screen
from tui.widgets import chart as chart_widget

pytestmark = pytest.mark.single_backend


def test_the_page_and_the_console_read_one_definition(server_url):
    served = httpx.get(server_url + "/ui/charts.json").json()
    assert served == charts.definition()
    assert [c["title"] for c in served["charts"]][-1] == "System · network bytes/s"
    assert {c["group"] for c in served["charts"]} == {None, "System"}
    # The console's charts are the definition's objects, not a copy of them.
    assert chart_widget.ChartSpec is charts.ChartDef and chart_screen.DEFAULT_CHARTS is charts.DEFAULT_CHARTS
    assert chart_screen.OWN_CHARTS == served["own_charts"]
    assert charts.HIDDEN_METRICS == tuple(served["hidden_metrics"])
    runs = [RunSummary(run_id=r, name=r, status=RunStatus.FINISHED, created_at=1.7e9, last_seen_at=1.7e9, config=p)
            for r, p in
            (("a", {"lr": 0.1, "run_name": "a", "seed": 1}), ("b", {"lr": 0.2, "run_name": "b", "seed": 1, "x": 2}))]
    assert runs_table.differing_params(runs) == charts.differing_params([r.config for r in runs]) == ["lr", "x"]
    # The page keeps no list of its own: no series the definition names is spelled in its script.
    script = (importlib.resources.files("nissa_server") / "web" / "app.js").read_text()
    assert "/ui/charts.json" in script
    for chart in charts.DEFAULT_CHARTS:
        for pattern in chart.names:
            assert pattern.rstrip("*") not in script, pattern


def test_a_pattern_matches_as_the_page_matches():
    assert charts.name_matches("ppo_update.entropy.*", "ppo_update.entropy.op")
    assert not charts.name_matches("ppo_update.entropy.*", "ppo_update.entropy")
    assert not charts.name_matches("a.b", "aXb"), "a dot is a dot"
    assert charts.name_matches("system.disk.*", "system.disk.read_bytes_per_s")
    val_loss = charts.ChartDef.of_name("val.loss")
    assert val_loss.title == "val.loss" and not val_loss.higher_is_better


def test_the_page_charts_what_the_definition_says_in_its_order(browser, server_url):
    with Feed(server_url, "defs-a") as feed:
        feed.epochs(0, 4)
    page, outside, errors = open_page(browser, server_url)
    asked = []
    page.on("request", lambda r: asked.append(r.url))
    page.goto(server_url + "/ui#run=defs-a")
    page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="entropy"]')
    names = {s["name"] for s in httpx.get(server_url + "/runs/defs-a/series").json()}
    expected = [c.title for c in charts.DEFAULT_CHARTS if any(c.matches(n) for n in names)]
    assert chart_titles(page) == expected and "entropy" in expected and "accuracy" in expected
    assert any(u.endswith("/ui/charts.json") for u in asked)
    assert not outside and not errors
    page.close()
