"""The web page's distributions: over steps (not clock times), every one reachable (a filter and pages, not
the first 12 alphabetically), a loop's own before a debug window's, in the order the server gives the console
too; tick labels that tell neighbours apart."""

from __future__ import annotations

import re

import httpx
import pytest
import torch

import nissa
from tests.e2e.api import wait_for
from tests.support.web import open_page

pytestmark = pytest.mark.single_backend
NUMBER = re.compile(r"^-?\d+(\.\d+)?(e-?\d+|[kMGTP])?$")


def _names(page) -> list[str]:
    return page.locator("#distributions").get_attribute("data-names").split("\n")


def test_distributions_over_steps_every_one_reachable(browser, server_url, tmp_path):
    run = nissa.init(server=server_url, run_name="many", log_dir=tmp_path / "runs", system_metrics=False)
    for i in range(5):
        run.step()
        values = torch.arange(100.0) * (4.0365 + i * 1e-4)
        run.log({"zeta": nissa.Histogram(values), "acts": nissa.Histogram(values),
                 **{f"debug/mlp/l{k:02}": nissa.Histogram(values) for k in range(12)}})
    run.finish()
    listing = f"{server_url}/runs/{run.run_id}/histograms"
    wait_for(lambda: httpx.get(listing).json()["total"] == 14, 30, "the distribution names")
    assert httpx.get(listing, params={"q": "ZET"}).json() == {"names": ["zeta"], "total": 1}
    page, outside, errors = open_page(browser, server_url)
    page.goto(server_url + f"/ui#run={run.run_id}")
    page.wait_for_selector('#distributions[data-total="14"] .chart[data-title="distribution · debug/mlp/l09"]'
                           '[data-points="5"]')
    assert _names(page) == ["acts", "zeta", *(f"debug/mlp/l{k:02}" for k in range(10))]
    acts = page.locator('.chart[data-title="distribution · acts"]')
    xticks = acts.get_attribute("data-xticks").split()
    assert xticks and all(NUMBER.match(t) for t in xticks), xticks  # steps, not "12:05am 1/1/70"
    assert {float(t) for t in xticks} <= {0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0}  # the loop's steps 0 to 4
    yticks = acts.get_attribute("data-yticks").split()
    assert len(set(yticks)) == len(yticks), yticks  # neighbours differ
    page.click("#distribution-next")
    wait_for(lambda: _names(page) == ["debug/mlp/l10", "debug/mlp/l11"], 30, "the second page")
    assert page.locator("#distribution-page").inner_text() == "13–14 of 14"
    paged = page.url
    assert "doffset=12" in paged, paged  # the page of distributions is in the link
    page.fill("#distribution-filter", "ZETA")
    wait_for(lambda: _names(page) == ["zeta"], 30, "the one the filter names")
    page.wait_for_selector('.chart[data-title="distribution · zeta"][data-points="5"]')
    assert page.locator("#distribution-charts .chart").count() == 1
    filtered = page.url
    assert "dfilter=ZETA" in filtered and "doffset" not in filtered, filtered  # a new filter: its first page

    again, outside_too, errors_too = open_page(browser, server_url)  # each link opens the same view
    again.goto(paged)
    again.wait_for_selector('#distributions[data-total="14"] .chart[data-title="distribution · debug/mlp/l11"]')
    assert _names(again) == ["debug/mlp/l10", "debug/mlp/l11"]
    assert again.locator("#distribution-page").inner_text() == "13–14 of 14"
    again.goto(server_url + "/ui")
    again.goto(filtered)
    again.wait_for_selector('#distributions[data-total="1"] .chart[data-title="distribution · zeta"][data-points="5"]')
    assert _names(again) == ["zeta"] and again.locator("#distribution-filter").input_value() == "ZETA"
    assert not outside and not errors and not outside_too and not errors_too
