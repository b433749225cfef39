"""GET /runs: paged, filtered, each run a bounded summary whatever its config."""

import httpx
import pytest

from leyline import RunFinished, RunStarted, make_event
from tests.support import IngestClient


def _run(run_id, name, config, finish=None):
    events = [make_event(RunStarted(name=name, config=config, host="h" * 500), run_id=run_id, seq=1, ts=1.7e9)]
    if finish is not None:
        events.append(make_event(finish, run_id=run_id, seq=2, ts=1.7e9 + 30))
    return events


async def _store(server_url, run_id, events):
    async with IngestClient(server_url, run_id) as client:
        await client.send(events)
        await client.wait_ack(events[-1].seq)


@pytest.fixture
async def http(server_url):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as client:
        yield client


async def test_runs_are_paged_filtered_and_summarized(server_url, http):
    done = RunFinished(status="completed", duration_s=30.0, rounds=4, final_accuracy=0.61, best_accuracy=0.64,
                       fossilized=2, pruned=1)
    await _store(server_url, "esper-1", _run("esper-1", "sweep lr", {"policy": "ppo", "lr": 3e-4}, done))
    for i in range(4):
        await _store(server_url, f"other-{i}", _run(f"other-{i}", f"plain {i}", {"batch": i}))
    page = await http.get("/runs", params={"limit": 2})
    assert page.headers["x-total-count"] == "5"
    assert [r["run_id"] for r in page.json()] == ["other-3", "other-2"]
    assert page.headers["link"] == '</runs?limit=2&offset=2>; rel="next"'
    middle = await http.get("/runs", params={"limit": 2, "offset": 2})
    assert [r["run_id"] for r in middle.json()] == ["other-1", "other-0"]
    link = middle.headers["link"]
    assert 'rel="next"' in link and '<' + '/runs?limit=2&offset=0>; rel="prev"' in link
    esper = (await http.get("/runs", params={"name": "SWEEP"})).json()
    assert [r["run_id"] for r in esper] == ["esper-1"]
    run = esper[0]
    assert run["summary"] == {"final_accuracy": 0.61, "best_accuracy": 0.64, "fossilized": 2, "pruned": 1,
                              "rounds": 4, "policy": "ppo"}
    assert run["params"] == {"policy": "ppo", "lr": 3e-4} and "config" not in run
    assert run["status"] == "finished" and run["duration_s"] == 30.0 and run["ranks"] == 1
    assert run["started"] == 1.7e9 and run["ended"] == 1.7e9 + 30 and len(run["host"]) == 80
    plain = (await http.get("/runs", params={"status": "live,lost", "name": "plain"})).json()
    assert {r["summary"] is None for r in plain} == {True} and len(plain) == 4
    ended = RunFinished(status="completed", duration_s=2.0)
    await _store(server_url, "loop-1", _run("loop-1", "a loop", {"lr": 0.1}, ended))
    loop = (await http.get("/runs", params={"name": "a loop"})).json()[0]
    assert loop["status"] == "finished" and loop["summary"] is None, "a plain loop's end is no Esper outcome"
    assert (await http.get("/runs", params={"name": "%"})).json() == []
    assert (await http.get("/runs", params={"status": "gone"})).status_code == 422
    assert (await http.get("/runs", params={"limit": 501})).status_code == 422
    assert (await http.get("/runs/esper-1")).json()["config"] == {"policy": "ppo", "lr": 3e-4}


async def test_a_page_stays_small_whatever_the_configs(server_url, http):
    # The attack: runs with 250 KB configs made one listing 50 MB. A summary keeps 64 entries of 80 chars.
    huge = {f"key.{i:05d}." + "k" * 200: "v" * 1000 for i in range(190)}
    for i in range(6):
        await _store(server_url, f"big-{i}", _run(f"big-{i}", "big", huge))
    page = await http.get("/runs")
    assert len(page.json()) == 6
    assert len(page.content) < 6 * 16_000, len(page.content)
    params = page.json()[0]["params"]
    assert len(params) == 64 and max(len(k) for k in params) <= 80 and max(len(v) for v in params.values()) <= 80
    assert len((await http.get("/runs/big-0")).json()["config"]) == 190
