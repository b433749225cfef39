"""The web page as a daily tool, in a real headless Chromium: a three-run sweep of a plain loop overlaid with
smoothing, one colour per run, short run labels, the cursor synced across charts (hover one, read the
other's legend), one x range, a single point drawn, and a link that opens the same view again."""

from __future__ import annotations

import asyncio
import concurrent.futures
import math

import httpx
import pytest

from leyline import Metrics, RunStarted, make_event
from tests.support import IngestClient
from tests.support.web import chart_titles, open_page

pytestmark = pytest.mark.single_backend
RUNS = ("sweep-1a7", "sweep-2b7", "sweep-3c9")


def _sweep(url):
    """Three runs of one loop, all named ``sweep``: a noisy ``loss`` (steps 0–190, 0–350), two labelled
    lines of ``val.acc`` each, one ``lr`` point."""
    async def send():
        for r, run_id in enumerate(RUNS):
            async with IngestClient(url, run_id) as client:
                events, seq = [], 0

                def add(payload, step, events=events, run_id=run_id):
                    nonlocal seq
                    seq += 1
                    events.append(make_event(payload, run_id=run_id, seq=seq, ts=1.7e9 + seq, step=step))

                add(RunStarted(name="sweep", config={"lr": 0.1 * (r + 1)}), 0)
                last = 190 if r == 0 else 350
                for step in range(0, last + 1, 10):
                    noise = 0.3 if (step // 10) % 2 else -0.3
                    add(Metrics(values={"loss": (2.0 / (1 + step / 50) + noise) * (1 + r / 4)}), step)
                    for split in ("a", "b"):
                        add(Metrics(values={"val.acc": step / 400 * (1 + r / 8) + (0.05 if split == "b" else 0)},
                                    labels={"split": split}), step)
                add(Metrics(values={"lr": 0.1 * (r + 1)}), 100)
                await client.send(events)
                await client.wait_ack(events[-1].seq)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright's loop runs on this thread
        pool.submit(asyncio.run, send()).result(60)


def _ema(ys, weight):
    ema, count, out = 0.0, 0, []
    for y in ys:
        ema, count = ema * weight + (1 - weight) * y, count + 1
        out.append(ema / (1 - weight ** count))
    return out


def _legend(page, title):
    return page.locator(f'.chart[data-title="{title}"] .legend').evaluate(
        "box => ({at: box.dataset.at, entries: [...box.querySelectorAll('.entry')].map(e => ({run: e.dataset.run, "
        "colour: e.dataset.colour, name: e.querySelector('.name').textContent,"
        " value: e.querySelector('.value').textContent}))})")


def test_a_sweep_overlaid_smoothed_synced_and_shared(browser, server_url):
    _sweep(server_url)
    page, outside, errors = open_page(browser, server_url)
    page.goto(server_url + f"/ui#run={RUNS[0]}&overlay={RUNS[1]},{RUNS[2]}")
    page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="val.acc"][data-state="ready"]')
    assert chart_titles(page)[:3] == ["loss", "lr", "val.acc"], "the loop's own metrics, full names"

    # One colour per run: a run's two labelled lines share it (dashed apart); short labels, not run ids.
    acc = _legend(page, "val.acc")
    assert acc["at"] == "last", "not hovering: each line's last value"
    colours = {}
    for entry in acc["entries"]:
        colours.setdefault(entry["run"], set()).add(entry["colour"])
    assert set(colours) == set(RUNS) and all(len(c) == 1 for c in colours.values())
    assert len({next(iter(c)) for c in colours.values()}) == 3, "three runs, three colours"
    names = [e["name"] for e in acc["entries"]]
    assert names[:2] == ["sweep ·a7 split=a", "sweep ·a7 split=b"] and "sweep ·9 split=a" in names
    assert all(e["value"] != "—" for e in acc["entries"])

    # One x range for the page: the shorter run's loss and the longer runs' accuracy share it.
    ranges = page.evaluate("window.nissa.view.charts.map(c => [c.plot.scales.x.min, c.plot.scales.x.max])")
    assert all(r == [0, 350] for r in ranges)
    # A series of one point draws a point.
    assert page.evaluate("window.nissa.view.charts.find(c => c.title === 'lr').plot.series[1].points.show") is True

    # Smoothing: the debiased EMA, the raw line kept dim beside it; remembered, and in the URL.
    raw_last = float(_legend(page, "loss")["entries"][0]["value"])
    page.locator("#smoothing").fill("0.9")
    page.wait_for_function("window.nissa.view.smoothing === 0.9")
    loss = page.evaluate("(() => { const c = window.nissa.view.charts.find(c => c.title === 'loss');"
                         " return {series: c.plot.series.length, alpha: c.plot.series[1].alpha,"
                         " y: c.plot.data[2]}; })()")
    assert loss["series"] == 1 + 2 * 3 and loss["alpha"] == 0.25, "each run: its raw line, dim, and its smoothed one"
    ys = [2.0 / (1 + s / 50) + (0.3 if (s // 10) % 2 else -0.3) for s in range(0, 191, 10)]
    expect = _ema(ys, 0.9)
    got = [y for y in loss["y"] if y is not None][:len(expect)]
    assert all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(got, expect, strict=True))
    assert float(_legend(page, "loss")["entries"][0]["value"]) != raw_last
    assert page.evaluate("localStorage.getItem('nissa-smoothing')") == "0.9"
    assert "smooth=0.9" in page.url

    # The cursor synced: hover the loss chart, read the accuracy chart's legend at the same x.
    box = page.locator('.chart[data-title="loss"] .u-over').bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.wait_for_function("document.querySelector('.chart[data-title=\"val.acc\"] .legend').dataset.at === 'cursor'")
    x_text = page.locator('.chart[data-title="val.acc"] .legend .x').text_content()
    x = float(x_text.split()[1])
    assert 160 <= x <= 190, x_text
    acc = _legend(page, "val.acc")
    expect = _ema([s / 400 for s in range(0, int(x) + 1, 10)], 0.9)[-1]  # run a's split=a, smoothed, at that x
    assert acc["entries"][0]["value"] == f"{float(f'{expect:.4g}'):g}"
    page.mouse.move(0, 0)

    # Change the charts (remove lr, add a series by hand) and the x axis: the URL opens the same view.
    page.locator('.chart[data-title="lr"] button[title="remove"]').click()
    page.locator('.chart[data-title="val.acc"] button[title="remove"]').click()
    page.select_option("#picker", "val.acc")
    page.click("#add-chart")
    page.select_option("#axis", "epoch")
    page.wait_for_selector('#charts[data-ready="1"]')
    shared = page.url
    assert "x=epoch" in shared and "hide=lr" in shared and "add=val.acc" in shared
    titles = chart_titles(page)
    assert titles == ["loss", "val.acc"]
    other = browser.new_page(viewport={"width": 1400, "height": 900})
    other.goto(shared)
    other.wait_for_selector('#charts[data-ready="1"]')
    assert chart_titles(other) == titles and "lr" not in titles
    assert other.locator("#axis").input_value() == "epoch" and other.locator("#smoothing").input_value() == "0.9"
    assert other.evaluate("window.nissa.view.runs") == list(RUNS)
    other.close()
    assert not outside and not errors
    page.close()


def test_the_root_sends_a_browser_to_the_page_and_an_api_client_json(server_url):
    browser_like = httpx.get(server_url + "/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert browser_like.status_code == 303 and browser_like.headers["location"] == "/ui"
    assert httpx.get(server_url + "/").json()["ui"] == "/ui"
    assert httpx.get(server_url + "/", headers={"Accept": "application/json"}).json()["ui"] == "/ui"
    icon = httpx.get(server_url + "/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert httpx.get(server_url + "/ui/favicon.svg").status_code == 200
