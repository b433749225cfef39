"""GET /runs: paged, filtered, each run a bounded summary whatever its config."""

import httpx
import msgspec
import pytest

from leyline import Metrics, RunDetail, RunFinished, RunStarted, RunSummary, SummaryUpdated, make_event
from leyline.esper import EsperOutcome
from leyline.runs_table import RunsTable, table_columns
from leyline.series import internal
from tests.support import IngestClient, async_wait_for


def _run(run_id, name, config, finish=None, summary=None):
    events = [make_event(RunStarted(name=name, config=config, host="h" * 500), run_id=run_id, seq=1, ts=1.7e9)]
    for payload in ([SummaryUpdated(values=summary)] if summary else []) + ([finish] if finish else []):
        events.append(make_event(payload, run_id=run_id, seq=len(events) + 1, ts=1.7e9 + 30))
    return events


async def _store(server_url, run_id, events):
    async with IngestClient(server_url, run_id) as client:
        await client.send(events)
        await client.wait_ack(events[-1].seq)


async def _summarised(http, run_id, key):
    async def done():
        return key in (await http.get(f"/runs/{run_id}")).json()["metrics"]
    await async_wait_for(done, timeout=30, message=f"{run_id}'s {key} summarised")


@pytest.fixture
async def http(server_url):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as client:
        yield client


async def test_runs_are_paged_filtered_and_summarized(server_url, http):
    done = EsperOutcome(status="completed", duration_s=30.0, rounds=4, final_accuracy=0.61, best_accuracy=0.64,
                        fossilized=2, pruned=1)
    await _store(server_url, "esper-1", _run("esper-1", "sweep lr", {"policy": "ppo", "lr": 3e-4}, done.finished(),
                                             done.summaries()))
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
    await _summarised(http, "esper-1", "rounds")
    esper = (await http.get("/runs", params={"name": "SWEEP"})).json()
    assert [r["run_id"] for r in esper] == ["esper-1"]
    run = esper[0]
    # Esper's results are its summaries, as any loop's; nothing of them in the generic end, no outcome of its own.
    assert {k: v["best"] for k, v in run["metrics"].items() if not internal(k)} == {
        "final_accuracy": 0.61, "best_accuracy": 0.64, "fossilized": 2, "pruned": 1,
        "rounds": 4}
    assert "summary" not in run
    assert run["config"] == {"policy": "ppo", "lr": 3e-4} and "params" not in run
    assert run["status"] == "finished" and run["duration_s"] == 30.0 and run["world_size"] == 1
    assert run["started_at"] == 1.7e9 and run["ended_at"] == 1.7e9 + 30 and len(run["host"]) == 80
    assert not {"started", "ended"} & set(run), "one name for each time"
    plain = (await http.get("/runs", params={"status": "live,lost", "name": "plain"})).json()
    assert len(plain) == 4
    ended = RunFinished(status="completed", duration_s=2.0)
    await _store(server_url, "loop-1", _run("loop-1", "a loop", {"lr": 0.1}, ended))
    await _summarised(http, "loop-1", "run_finished.duration_s")
    loop = (await http.get("/runs", params={"name": "a loop"})).json()[0]
    ended_with = [k for k in loop["metrics"] if k.startswith("run_finished.")]
    assert loop["status"] == "finished" and ended_with == ["run_finished.duration_s"], \
        "a plain loop's end says nothing of rounds, accuracy or seeds"
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
    params = page.json()[0]["config"]
    assert len(params) == 64 and max(len(k) for k in params) <= 80 and max(len(v) for v in params.values()) <= 80
    assert len((await http.get("/runs/big-0")).json()["config"]) == 190


async def test_the_row_and_the_detail_are_leyline_s_and_the_table_s_columns_come_with_the_page(server_url, http):
    """One definition of the runs row: what ``GET /runs`` and ``GET /runs/{id}`` send is exactly
    ``leyline.RunSummary`` and ``leyline.RunDetail`` (every field, nothing else, the OpenAPI schema theirs), and
    ``GET /runs-table`` serves the page with the columns ``leyline.runs_table`` computes of it."""
    for run_id, config, loss in (("t-a", {"lr": 0.1, "opt": "sgd"}, 0.5), ("t-b", {"lr": 0.2, "opt": "sgd"}, 0.4)):
        events = _run(run_id, run_id, config)
        events += [make_event(Metrics(values={"val_loss": loss, "acc": 1 - loss}), run_id=run_id, seq=2, ts=1.7e9 + 1,
                              step=1),
                   make_event(Metrics(values={"val_loss": loss / 2}, labels={"split": "val"}), run_id=run_id, seq=3,
                              ts=1.7e9 + 2, step=2)]
        await _store(server_url, run_id, events)

    async def summarised() -> bool:
        return all("val_loss{split=val}" in r["metrics"] for r in (await http.get("/runs")).json())
    await async_wait_for(summarised, timeout=30, message="both runs summarised")
    listed = (await http.get("/runs")).json()
    assert [set(r) for r in listed] == [set(RunSummary.__struct_fields__)] * 2
    strict = msgspec.json.Decoder(list[RunSummary], strict=True)
    assert strict.decode(msgspec.json.encode(listed)) == msgspec.json.decode((await http.get("/runs")).content,
                                                                               type=list[RunSummary])
    detail = (await http.get("/runs/t-a")).json()
    assert set(detail) == set(RunDetail.__struct_fields__)
    assert msgspec.convert(detail, RunDetail).config == {"lr": 0.1, "opt": "sgd"}
    table = msgspec.json.decode((await http.get("/runs-table", params={"sort": "config.lr"})).content, type=RunsTable)
    assert [r.run_id for r in table.runs] == ["t-a", "t-b"] and table.total == 2
    assert table.columns == table_columns(table.runs)
    assert table.columns.metrics == ["acc", "val_loss", "val_loss{split=val}"]  # one rank: no rank label
    assert table.columns.params == ["lr"] and table.columns.names["val_loss{split=val}"] == "val_loss{split=val}"
    assert (await http.get("/runs-table", params={"q": "config.lr>"})).status_code == 400
    schema = (await http.get("/openapi.json")).json()
    component = schema["components"]["schemas"]
    assert set(component["RunSummary"]["properties"]) == set(RunSummary.__struct_fields__)
    assert set(component["RunDetail"]["properties"]) == set(RunDetail.__struct_fields__)
    ok = schema["paths"]["/runs"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["items"]["$ref"].endswith("/RunSummary")
    assert schema["paths"]["/runs-table"]["get"]["responses"]["200"]["content"]["application/json"]["schema"][
        "$ref"].endswith("/RunsTable")
