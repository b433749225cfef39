"""A sweep watched from the web page in Chromium: a real PBT sweep (an agent, trials of examples/sweep_loop.py)
listed at #sweeps and shown at #sweep=ID as the server's view says (trials, the curves with the exploits marked,
the parallel coordinates, the lineage), a trial and then the sweep stopped, each after a confirmation; and a
server with a token: the page asks for it, then stops the sweep with it (values the spec wrote shown as text)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import httpx
import pytest

from tests.e2e.procs import _env, script
from tests.support.server import running_server, stop_process
from tests.support.waiting import wait_for
from tests.support.web import open_page

pytestmark = [pytest.mark.single_backend, pytest.mark.timeout(600)]
LOOP = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sweep_loop.py"
TOKEN = "s3cret-sweep"
HOSTILE = '<img src=x onerror="document.title=1"><b>bold</b>'


def _spec(tmp_path: pathlib.Path, trials: int = 2) -> dict:
    return {"name": "web-pbt", "project": "web", "method": "pbt", "trials": trials, "parallel": trials,
            "command": [sys.executable, str(LOOP), "--steps", "1000000", "--step-s", "0.02",
                        "--log-dir", str(tmp_path / "runs")],
            "metric": {"name": "val_loss"}, "parameters": {"lr": {"min": 0.002, "max": 0.3, "log": True},
                                                           "momentum": {"values": [0.0, 0.9]}},
            "pbt": {"interval": 5, "quantile": 0.5}}


def _create(url: str, spec: dict, token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    reply = httpx.post(f"{url}/sweeps", content=json.dumps(spec), headers=headers, timeout=30)
    assert reply.status_code == 201, reply.text
    return reply.json()["sweep_id"]


def _view(url: str, sweep_id: str) -> dict:
    return httpx.get(f"{url}/sweeps/{sweep_id}/view", timeout=30).json()


def _answer(page, action: str, answer: str, trial: str | None = None) -> None:
    where = f'#sweep-trials tr[data-trial="{trial}"] ' if trial else ""
    page.click(f'{where}button[data-action="{action}"]')
    page.wait_for_selector("dialog#sweep-confirm[open]")
    page.click(f'dialog#sweep-confirm button[data-answer="{answer}"]')


def test_a_real_pbt_sweep_watched_and_stopped_from_its_page(browser, server_url, tmp_path):
    sweep_id = _create(server_url, _spec(tmp_path))
    agent = subprocess.Popen([script("nissa"), "sweep", "agent", sweep_id, "--server", server_url, "--slots", "2",
                              "--log-dir", str(tmp_path / "agent")], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=_env(), cwd=tmp_path)
    try:
        wait_for(lambda: any(e["status"] == "applied" for e in _view(server_url, sweep_id)["lineage"]), timeout=300,
                 interval=0.5, message="an exploit applied")
        page, outside, errors = open_page(browser, server_url)
        page.goto(f"{server_url}/ui#sweeps")
        page.click(f'#sweeps-list tr[data-sweep="{sweep_id}"] a')
        page.wait_for_selector('#sweep-view[data-ready="1"]')
        view = _view(server_url, sweep_id)
        assert page.locator("#sweep-trials tbody tr").evaluate_all("rs => rs.map(r => r.dataset.trial)") == ["1", "2"]
        heads = page.locator("#sweep-trials th").all_text_contents()
        assert heads[:5] == ["trial", "status", "lr", "momentum", "val_loss"], heads
        exploit = view["lineage"][0]
        trial, source = exploit["trial_id"], exploit["source_trial"]
        row = page.locator(f'#sweep-lineage tr[data-trial="{trial}"][data-source="{source}"]')
        assert exploit["change"] in row.first.inner_text()  # the server's words, as text
        page.wait_for_function("document.querySelector('#sweep-curves .chart')?.dataset.marks >= 1")
        canvas = page.locator("#sweep-parcoords")
        assert canvas.get_attribute("data-axes") == "config.lr,config.momentum,val_loss (best)"
        assert canvas.get_attribute("data-lines") == "2"

        _answer(page, "stop-trial", "no", trial="1")  # kept: nothing sent
        run_1 = view["trials"][0]["run_id"]
        assert not [c for c in httpx.get(f"{server_url}/runs/{run_1}/commands").json() if c["action"] == "stop"]
        _answer(page, "stop-trial", "yes", trial="1")
        page.wait_for_selector('#sweep-trials tr[data-trial="1"][data-status="stopped"]', timeout=120_000)
        assert page.locator('#sweep-trials tr[data-trial="2"]').get_attribute("data-status") == "running"

        _answer(page, "stop-sweep", "yes")
        page.wait_for_selector('#sweep-view[data-status="stopped"]')
        assert not page.locator('button[data-action="stop-sweep"]').is_visible()
        assert agent.wait(120) == 0
        assert outside == [] and errors == []
    finally:
        stop_process(agent)


def test_a_server_with_a_token_shows_and_stops_a_sweep_only_with_it(browser, tmp_path):
    with running_server(tmp_path, token=TOKEN, read_auth=True) as url:
        spec = {**_spec(tmp_path, trials=2), "method": "grid", "parameters": {"opt": {"values": [HOSTILE, "sgd"]}}}
        del spec["pbt"]
        sweep_id = _create(url, spec, token=TOKEN)
        httpx.post(f"{url}/sweeps/{sweep_id}/lease", json={"agent": "host-1", "slots": 2}, headers={
            "Authorization": f"Bearer {TOKEN}"}, timeout=30).raise_for_status()
        page, outside, errors = open_page(browser, url)
        page.goto(f"{url}/ui#sweep={sweep_id}")
        page.wait_for_selector("#auth:not([hidden])")
        assert "token" in page.locator("#error").inner_text()
        page.fill("#token", TOKEN)
        page.click("#auth button")
        page.wait_for_selector('#sweep-view[data-ready="1"]')
        values = page.locator("#sweep-trials tbody td:nth-child(3)").all_text_contents()
        assert HOSTILE in values, values  # a value the spec wrote, shown as text, never as markup
        assert page.locator("#sweep-view img, #sweep-view b").count() == 0 and page.title() != "1"
        _answer(page, "stop-sweep", "yes")
        page.wait_for_selector('#sweep-view[data-status="stopped"]')
        reply = httpx.get(f"{url}/sweeps/{sweep_id}", headers={"Authorization": f"Bearer {TOKEN}"}).json()
        assert reply["status"] == "stopped"
        assert outside == [] and errors == []
