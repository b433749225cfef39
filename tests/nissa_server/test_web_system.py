"""The web page's System group: a plain loop's run with system metrics shows its own charts first, then the
machine's (CPU, memory, RSS, I/O), and no GPU chart where the machine has no GPU figures."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.api import wait_for
from tests.support.web import chart_titles, open_page

pytestmark = pytest.mark.single_backend


def _series_names(server_url: str, run_id: str) -> set[str]:
    """The run's series listed so far; none while the server asks to come back later (a 503 while its series
    pass catches up, a 429 on a busy machine): the wait goes on."""
    reply = httpx.get(f"{server_url}/runs/{run_id}/series", timeout=30)
    return {s["name"] for s in reply.json()} if reply.status_code == 200 else set()


def test_a_run_with_system_metrics_has_a_system_group(browser, server_url, tmp_path):
    import nissa

    run = nissa.init(server=server_url, run_name="sys", log_dir=tmp_path / "runs", system_metrics_s=0.05)
    try:
        for i in range(4):
            run.step()
            run.log({"loss": 1.0 / (i + 1)})
        wait_for(lambda: "system.memory.process_rss_bytes" in _series_names(server_url, run.run_id), 30,
                 "the system series")
        page, outside, errors = open_page(browser, server_url)
        page.goto(server_url + f"/ui#run={run.run_id}")
        page.wait_for_selector('#charts[data-ready="1"] .chart[data-title="System · process RSS bytes"]')
        titles = chart_titles(page)
        assert titles[0] == "loss", "the loop's own metrics first"
        system = [t for t in titles if t.startswith("System · ")]
        assert titles[1:] == system and {"System · CPU %", "System · memory %"} <= set(system)
        gpu = httpx.get(f"{server_url}/runs/{run.run_id}/series").json()
        if not any(s["name"].startswith("system.gpu.") for s in gpu):
            assert not [t for t in system if "GPU" in t], "no empty GPU charts on a machine without GPU figures"
        assert not outside and not errors
    finally:
        run.finish()


def test_a_watched_models_distributions_are_bands_and_a_histogram(browser, server_url, tmp_path):
    import torch

    import nissa

    run = nissa.init(server=server_url, run_name="dist", log_dir=tmp_path / "runs", system_metrics=False)
    model = torch.nn.Linear(8, 4)
    run.watch(model, histograms="parameters", bins=16)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(7):
        run.step()
        opt.zero_grad()
        model(torch.randn(16, 8)).pow(2).mean().backward()
        opt.step()
    run.finish()
    wait_for(lambda: httpx.get(f"{server_url}/runs/{run.run_id}/histograms/parameters/weight").json()["taken"] == 6,
             30, "the histograms")
    page, outside, errors = open_page(browser, server_url)
    page.goto(server_url + f"/ui#run={run.run_id}")
    chart = '.chart[data-title="distribution · parameters/weight"]'
    page.wait_for_selector(f'#distributions {chart}[data-points="6"][data-step="5"]')  # steps 0 to 5
    assert page.locator('.chart[data-title="distribution · parameters/bias"]').count() == 1
    page.locator(f"{chart} input[type=range]").fill("0")  # the histogram at the first step
    page.wait_for_selector(f'{chart}[data-step="0"]')
    assert page.locator(f"{chart} output").inner_text().startswith("0: 32 values from ")
    assert not outside and not errors
