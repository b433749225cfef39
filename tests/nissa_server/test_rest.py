"""REST reads against a real server: runs, events paging and filters, health, metrics."""

import httpx
import pytest
from websockets.asyncio.client import connect

from leyline import EventKind, HubHealth, RunStarted, make_event
from leyline.esper import EsperKind
from tests.support import IngestClient, close_of, events_for, ingest_events, running_server, ws_url

MIXED = (EventKind.HEARTBEAT, EsperKind.EPOCH_COMPLETED)


@pytest.fixture
async def http(server_url):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as client:
        yield client


async def test_runs_list_and_detail(server_url, http):
    assert (await http.get("/runs")).json() == []
    events = events_for("rest", 9, started=True, kinds=MIXED)
    events.append(make_event(HubHealth(queue_depth=1, logged=10, sent=10, acked=9, dropped={}, reconnects=0,
                                       connected=True), run_id="rest", seq=10, ts=1.7e9))
    async with IngestClient(server_url, "rest", name="first") as client:
        await client.send(events)
        await client.wait_ack(10)
        runs = (await http.get("/runs")).json()
        run = (await http.get("/runs/rest")).json()
    assert [r["run_id"] for r in runs] == ["rest"]
    assert run["status"] == "live" and run["connected"] is True and run["name"] == "demo"
    assert run["config"] == {"policy": "ppo", "n_envs": 2, "lr": 3e-4, "amp": None}
    assert run["last_seq"] == {"0": 10} and run["hub_health"]["acked"] == 9
    assert run["counts"] == {"run_started": 1, "heartbeat": 4, "epoch_completed": 4, "hub_health": 1}
    assert run["started_at"] == 1.7e9 + 1 and run["ended_at"] is None
    assert (await http.get("/runs/rest")).json()["connected"] is False
    assert (await http.get("/runs/nope")).status_code == 404


async def test_events_paging_and_filters(server_url, http):
    await ingest_events(server_url, events_for("page", 25, kinds=MIXED))
    await ingest_events(server_url, events_for("page", 5, rank=1))
    seqs, after = [], 0
    while True:
        page = (await http.get("/runs/page/events", params={"after_seq": after, "limit": 7, "rank": 0})).json()
        if not page:
            break
        seqs += [e["seq"] for e in page]
        after = page[-1]["seq"]
    assert seqs == list(range(1, 26))
    both = (await http.get("/runs/page/events", params={"limit": 4})).json()
    assert [(e["seq"], e["rank"]) for e in both] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    beats = (await http.get("/runs/page/events", params={"kind": "heartbeat", "rank": 0})).json()
    assert [e["seq"] for e in beats] == list(range(1, 26, 2))
    assert {e["kind"] for e in beats} == {"heartbeat"}


async def _page_all(http, run_id, **params):
    """Follow the (seq, rank) cursor to the end; every page holds at most ``limit`` events."""
    got, cursor = [], {}
    while page := (await http.get(f"/runs/{run_id}/events", params={**params, **cursor})).json():
        assert len(page) <= params["limit"]
        got += [(e["seq"], e["rank"], e["kind"]) for e in page]
        cursor = {"after_seq": page[-1]["seq"], "after_rank": page[-1]["rank"]}
    return got


async def test_paging_a_run_of_several_ranks_returns_each_event_once(server_url, http):
    await ingest_events(server_url, events_for("ranks", 7, kinds=MIXED))
    await ingest_events(server_url, events_for("ranks", 5, rank=1, kinds=MIXED))
    await ingest_events(server_url, events_for("ranks", 6, rank=2, kinds=(EventKind.HEARTBEAT,)))
    async with IngestClient(server_url, "ranks"):  # a command adds the server's own events, rank -1
        escalated = await http.post("/escalate", json={"run_id": "ranks", "action": "debug", "epochs": 1})
        assert escalated.status_code == 202
    stored = [(e["seq"], e["rank"], e["kind"]) for e in (await http.get("/runs/ranks/events")).json()]
    assert len(stored) == 7 + 5 + 6 + 1 and stored == sorted(stored, key=lambda e: (e[0], e[1]))
    for limit in (1, 2, 5):
        assert await _page_all(http, "ranks", limit=limit) == stored
        for kind in ("heartbeat", "epoch_completed,command_status"):
            wanted = [e for e in stored if e[2] in kind.split(",")]
            assert await _page_all(http, "ranks", limit=limit, kind=kind) == wanted
    assert await _page_all(http, "ranks", limit=2, rank=1) == [e for e in stored if e[1] == 1]


@pytest.mark.parametrize("params", [{"after_seq": -1}, {"after_seq": 2**63}, {"limit": 0}, {"limit": 10001},
                                    {"kind": "weather"},
                                    {"rank": -2}, {"after_seq": "x"}, {"after_rank": -2},
                                    {"after_rank": 65536}])
async def test_bad_event_queries_are_422(server_url, http, params):
    await ingest_events(server_url, events_for("q", 1))
    resp = await http.get("/runs/q/events", params=params)
    assert resp.status_code == 422 and resp.json()["detail"]


async def test_events_of_unknown_run_is_404(http):
    assert (await http.get("/runs/nope/events")).status_code == 404
    assert (await http.get("/runs/nope/commands")).status_code == 404


async def test_healthz_and_metrics(server_url, http):
    await ingest_events(server_url, events_for("m", 12))
    async with IngestClient(server_url, "m"):
        assert (await http.post("/escalate", json={"run_id": "m", "action": "debug", "epochs": 1})).status_code == 202
    async with connect(ws_url(server_url, "/ws/ingest")) as bad:
        await bad.send("{nope")
        await close_of(bad)
    health = (await http.get("/healthz")).json()
    assert health["status"] == "ok" and health["runs"] == 1
    assert health["schema_version"] == server_url.app.state.nissa.store.schema_version
    text = (await http.get("/metrics")).text
    for series in ("nissa_events_ingested_total 12.0", "nissa_watchers 0.0", "nissa_writer_queue_batches",
                   "nissa_watcher_queue_events", "nissa_ingest_connections 0.0", 'nissa_commands{status="queued"} 1.0',
                   'nissa_frames_rejected_total{reason="bad_frame"} 1.0', "nissa_commands_created_total 1.0",
                   "nissa_series_waiting_events"):
        assert series in text, series


async def test_openapi_documents_every_endpoint_with_examples(http):
    doc = (await http.get("/openapi.json")).json()
    paths = doc["paths"]
    for path in ("/runs", "/runs/{run_id}", "/runs/{run_id}/events", "/runs/{run_id}/commands", "/escalate",
                 "/commands/{command_id}", "/runs/{run_id}/artifacts", "/runs/{run_id}/artifacts/{name}",
                 "/healthz", "/metrics"):
        assert path in paths, path
    for path, operations in paths.items():
        for method, op in operations.items():
            ok = op["responses"].get("200") or op["responses"].get("201") or op["responses"].get("202")
            content = ok["content"]
            media = next(iter(content.values()))
            assert "example" in media or "examples" in media or "format" in media.get("schema", {}), (path, method)
    assert "payload" in doc["components"]["schemas"]["Event"]["properties"]


MAX_INT = 2**63 - 1


async def test_every_cursor_the_schema_accepts_is_answered(server_url, http):
    # The largest seq plus one overflowed the database's integer: a 500 instead of an empty page.
    await ingest_events(server_url, events_for("edge", 4, kinds=(EventKind.HEARTBEAT, EventKind.ANOMALY_DETECTED)))
    await ingest_events(server_url, events_for("edge", 2, rank=1))
    for after_seq in (0, 3, MAX_INT):
        for after_rank in (None, -1, 65535):
            for kind in (None, "anomaly_detected", "heartbeat"):
                for rank in (None, -1, 65535):
                    params = {"after_seq": after_seq, "limit": 10000, **({"kind": kind} if kind else {}),
                              **({"after_rank": after_rank} if after_rank is not None else {}),
                              **({"rank": rank} if rank is not None else {})}
                    resp = await http.get("/runs/edge/events", params=params)
                    assert resp.status_code == 200, (params, resp.text)
                    assert after_seq < MAX_INT or resp.json() == []


async def test_a_page_is_bounded_by_bytes_and_links_to_the_next(tmp_path):
    big = [make_event(RunStarted(name="big", config={"blob": "x" * 20_000}), run_id="big", seq=seq, ts=1.7e9)
           for seq in range(1, 13)]
    with running_server(tmp_path, max_page_bytes=64 * 1024) as url:
        await ingest_events(url, big, batch=3)
        await ingest_events(url, events_for("big", 3, rank=1))
        async with httpx.AsyncClient(timeout=30) as http:
            got, pages, link = [], 0, f"{url}/runs/big/events?limit=1000"
            while link:
                resp = await http.get(link)
                assert resp.status_code == 200 and len(resp.content) <= 64 * 1024 + 2
                got += [(e["seq"], e["rank"]) for e in resp.json()]
                pages += 1
                link = f"{url}{resp.links['next']['url']}" if "next" in resp.links else ""
                assert not link or "limit=1000" in link
            one = (await http.get(f"{url}/runs/big/events", params={"limit": 1, "after_seq": 12})).json()
    assert got == sorted([(s, 0) for s in range(1, 13)] + [(s, 1) for s in range(1, 4)])
    assert pages >= 4 and len(one) == 0


async def test_405_names_every_method_of_the_path(http):
    for method, path, allowed in (("POST", "/runs/x", "DELETE, GET, HEAD, PATCH"),
                                  ("DELETE", "/runs/x/artifacts/a.json", "GET, HEAD, PUT"),
                                  ("PUT", "/healthz", "GET, HEAD"), ("POST", "/openapi.json", "GET, HEAD")):
        resp = await http.request(method, path)
        assert resp.status_code == 405 and resp.headers["allow"] == allowed, (method, path, resp.headers)
