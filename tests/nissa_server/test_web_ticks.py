"""The web page's tick labels, one rule for every chart (uPlot's ``values`` hook): as many digits as tell
neighbours apart, SI or scientific notation where shorter."""

from __future__ import annotations

import pytest

import nissa
from tests.support.web import open_page

pytestmark = pytest.mark.single_backend


def test_a_loss_in_its_fourth_decimal_and_a_learning_rate_read_apart(browser, server_url, tmp_path):
    run = nissa.init(server=server_url, run_name="ticks", log_dir=tmp_path / "runs", system_metrics=False)
    for i in range(40):
        run.step()
        run.log({"loss": 4.0385 - i * 0.00005, "lr": 0.001 * (1 - i / 39), "tokens": 1000.0 * i})
    run.finish()
    page, outside, errors = open_page(browser, server_url)
    page.goto(server_url + f"/ui#run={run.run_id}")
    page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="tokens"][data-yticks]')
    ticks = {t: page.locator(f'.chart[data-title="{t}"]').get_attribute("data-yticks").split()
             for t in ("loss", "lr", "tokens")}
    for title, labels in ticks.items():
        assert len(labels) >= 3 and len(set(labels)) == len(labels), (title, labels)  # neighbours differ
    assert all(len(t.split(".")[-1]) == 4 for t in ticks["loss"]), ticks["loss"]  # 4.0365 4.0370, not 4.037
    assert "1e-3" in ticks["lr"] and not {"0.001", "0"} >= set(ticks["lr"]), ticks["lr"]
    assert any(t.endswith("k") for t in ticks["tokens"]), ticks["tokens"]
    assert not outside and not errors
