"""The web page in a real headless Chromium: a chart enlarged to the page and back (its button, Escape); an
Esper run that hides the charts its policy cannot have and says why in one line; and the page's rules (which
config keys tell runs apart, which charts a config rules out) agreeing with the console's on the same configs,
both read from the one definition (``leyline.charts``, ``GET /ui/charts.json``)."""

from __future__ import annotations

import pytest

from leyline import RunStatus, RunSummary, charts, runs_table
from tests.support.web import Feed, chart_titles, open_page

pytestmark = pytest.mark.single_backend

CONFIGS = [
    [{"lr": 0.1, "run_name": "a", "seed": 1}, {"lr": 0.2, "run_name": "b", "seed": 1, "x": 2}],
    [{"lr": 1, "flag": True, "opt": "adam"}, {"lr": 1.0, "flag": 1, "opt": "adam"}],
    [{"policy": "ppo", "n_envs": 4, "log_dir": "/a", "server": "u"}, {"policy": "heuristic", "n_envs": 4},
     {"steps": 10, "data.token": "t", "resume": "r"}],
    [{f"k{i}": i for i in range(9)}, {f"k{i}": -i for i in range(9)}],
    [{"policy": "heuristic"}],
    [{"a": "x"}, {"a": "x"}],
]
RULED = [[{"policy": "heuristic"}], [{"policy": "heuristic"}, {"policy": "heuristic", "lr": 1}],
         [{"policy": "heuristic"}, {"policy": "ppo"}], [{"policy": "ppo"}], [{}], []]


def _chart_box(page, title):
    return page.locator(f'.chart[data-title="{title}"]').bounding_box()


def test_a_chart_full_screen_and_back(browser, server_url):
    with Feed(server_url, "full-a") as feed:
        feed.epochs(0, 8)
    page, outside, errors = open_page(browser, server_url)
    page.goto(server_url + "/ui#run=full-a")
    page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="accuracy"][data-state="ready"]')
    chart = page.locator('.chart[data-title="accuracy"]')
    before, canvas_before = _chart_box(page, "accuracy"), chart.locator("canvas").bounding_box()
    assert before["width"] < 1400 * 0.6, "two charts a row: not full screen yet"
    assert before["x"] < 40, "the page's first chart in the grid's first cell"
    # Each line named as the console names it: its labels, or what the chart's pattern leaves of its series.
    names = lambda title: page.locator(f'.chart[data-title="{title}"] .legend .name').all_text_contents()  # noqa: E731
    assert names("accuracy") == ["env=0"] and names("entropy") == ["op"] and names("KL") == ["KL"]

    chart.locator('button[title^="full screen"]').click()
    page.wait_for_function("document.querySelector('.chart[data-title=\"accuracy\"]').dataset.full === '1'")
    full, canvas = _chart_box(page, "accuracy"), chart.locator("canvas").bounding_box()
    assert full["x"] == 0 and full["y"] == 0 and full["width"] == 1400 and full["height"] == 900, full
    assert canvas["width"] > 1300 and canvas["height"] > 700, "the plot itself enlarged, not only its box"
    # It covers the page: the chart beside it is beneath, and the legend still reads its lines.
    assert page.evaluate("document.elementFromPoint(1000, 400).closest('.chart').dataset.title") == "accuracy"
    assert chart.locator(".legend .entry").count() >= 1

    page.keyboard.press("Escape")
    page.wait_for_function("document.querySelector('.chart[data-title=\"accuracy\"]').dataset.full === ''")
    assert _chart_box(page, "accuracy") == before
    assert chart.locator("canvas").bounding_box()["width"] == canvas_before["width"]

    # Its button closes it too; only one chart is full screen at a time.
    chart.locator('button[title^="full screen"]').click()
    page.wait_for_selector('.chart[data-title="accuracy"][data-full="1"]')
    chart.locator('button[title^="full screen"]').click()
    page.wait_for_selector('.chart[data-full="1"]', state="detached")
    chart.locator('button[title^="full screen"]').click()
    page.locator('.chart[data-title="KL"] button[title^="full screen"]').dispatch_event("click")  # beneath it
    page.wait_for_selector('.chart[data-title="KL"][data-full="1"]')
    assert page.locator('.chart[data-full="1"]').count() == 1
    page.locator('.chart[data-title="KL"] button[title^="full screen"]').click()
    page.wait_for_selector('.chart[data-full="1"]', state="detached")
    assert not outside and not errors, (outside, errors)
    page.close()


def test_a_heuristic_run_hides_what_its_policy_cannot_have(browser, server_url):
    with Feed(server_url, "heur-w") as feed, Feed(server_url, "ppo-w") as ppo:
        feed.start({"policy": "heuristic"})
        feed.epochs(0, 4, ppo=False)
        ppo.epochs(0, 4)
    page, outside, errors = open_page(browser, server_url)
    page.goto(server_url + "/ui#run=heur-w")
    page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="accuracy"][data-state="ready"]')
    hidden, why = charts.hidden_charts([{"policy": "heuristic"}])
    assert not set(hidden) & set(chart_titles(page))
    note = page.locator("#charts-note")
    assert note.is_visible() and note.text_content() == "; ".join(why) == charts.UNAVAILABLE[0].why
    # A run with an update says nothing of the kind.
    page.goto(server_url + "/ui#run=ppo-w")
    page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="policy loss"]')
    assert not note.is_visible()
    assert not outside and not errors, (outside, errors)
    page.close()


def test_the_page_and_the_console_agree_on_the_same_configs(browser, server_url):
    page, outside, errors = open_page(browser, server_url)
    page.goto(server_url + "/ui")
    page.wait_for_selector("#runs thead th")  # the runs table drawn: the definition is read
    for configs in CONFIGS:
        runs = [RunSummary(run_id=f"r{i}", name=f"r{i}", status=RunStatus.FINISHED, created_at=1.7e9,
                           last_seen_at=1.7e9, config=c) for i, c in enumerate(configs)]
        console = runs_table.differing_params(runs)
        web = page.evaluate("runs => differingParams(runs)", [{"config": c} for c in configs])
        assert web == console == charts.differing_params(configs, charts.PARAM_COLUMNS), configs
        assert page.evaluate("runs => differingParams(runs, null)", [{"config": c} for c in configs]) == \
            charts.differing_params(configs), configs
    for configs in RULED:
        web = page.evaluate("configs => { const r = ruledOut(chartDefs, configs); return [[...r.titles], r.whys]; }",
                            configs)
        assert web == list(charts.hidden_charts(configs)), configs
    assert not outside and not errors, (outside, errors)
    page.close()


def test_the_marks_legend_names_only_the_kinds_of_mark_the_page_has(browser, server_url):
    with Feed(server_url, "marks-plain") as plain, Feed(server_url, "marks-esper") as esper:
        plain.epochs(0, 4, ppo=False)  # no seed reaches epoch 5: nothing fossilized
        esper.epochs(0, 8)
    page, outside, errors = open_page(browser, server_url)
    legend = lambda: page.locator("#legend-runs").inner_text()  # noqa: E731
    page.goto(server_url + "/ui#run=marks-plain")
    page.wait_for_selector('#charts[data-ready="1"] .chart[data-state="ready"]')
    assert "fossilized" not in legend() and "pruned" not in legend() and "marks:" not in legend(), legend()
    page, outside_too, errors_too = open_page(browser, server_url)
    page.goto(server_url + "/ui#run=marks-esper")
    page.wait_for_selector("#legend-runs >> text=fossilized")
    assert "pruned" not in legend() and "anomaly" not in legend(), legend()
    assert not outside + outside_too and not errors + errors_too, (outside, errors)
