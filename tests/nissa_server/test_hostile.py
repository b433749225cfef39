"""Hostile and careless input to the HTTP and websocket surface (both stores): each is refused with a
reason, and the server goes on serving."""

import socket

import httpx
import msgspec
import numpy as np
import pytest
from websockets.asyncio.client import connect

from leyline import EventKind, Metrics, make_event
from leyline.calls import ArgSpec, CommandSpec
from leyline.frames import CLOSE_BAD_FRAME
from leyline.samples import SAMPLE_PAYLOADS
from nissa_server.routes.series import MAX_SERIES
from nissa_server.series import downsample
from tests.support import IngestClient, ingest_events
from tests.support.clients import close_of, events_for, ws_url


@pytest.fixture
async def http(server_url):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as client:
        yield client


NUL_PATHS = ["/runs/a%00", "/runs/a/series/loss%00", "/runs/a/series/loss?runs=b%00", "/runs/a/series/x?labels=k%3D%00",
             "/runs?name=%00", "/alerts/%00", "/commands/%00", "/runs/%00/alerts", "/runs/%00/markers",
             "/runs/%00/events", "/runs/%00/commands", "/runs/%00/artifacts"]


async def test_a_nul_in_a_path_or_query_is_refused_with_a_reason(server_url, http):
    await ingest_events(server_url, events_for("a", 3, started=True))
    for path in NUL_PATHS:
        reply = await http.get(path)
        assert reply.status_code == 400, (path, reply.status_code, reply.text)
        assert "NUL" in reply.json()["detail"], path
    assert (await http.get("/runs?name=a%2500")).json() == [], "an escaped '%00' is no NUL"
    assert (await http.get("/runs/a")).json()["run_id"] == "a"


async def test_a_watch_of_no_possible_run_id_is_closed_with_a_reason(server_url):
    for run_id in ("a\x00", "a/b", "x" * 129, "-1"):
        async with connect(ws_url(server_url, "/ws/watch", run_id=run_id), open_timeout=30) as ws:
            code, reason = await close_of(ws)
        assert code == CLOSE_BAD_FRAME and "is not a run id" in reason, (run_id, code, reason)


async def test_a_nul_in_an_events_strings_is_stored_as_u_fffd_and_a_resend_is_no_conflict(server_url, http):
    started = make_event(msgspec.structs.replace(SAMPLE_PAYLOADS[EventKind.RUN_STARTED], name="x\x00y"), run_id="n",
                         seq=1, ts=1.7e9, step=0)
    logged = make_event(Metrics(values={"loss": 1.0}, labels={"split": "a\x00b"}), run_id="n", seq=2, ts=1.7e9, step=1)
    for _ in range(2):  # the second time, a trainer's resend after a reconnect: duplicates, acked
        async with IngestClient(server_url, "n", name="h\x00") as client:
            await client.send([started, logged])
            assert await client.wait_ack(2) == 2
    keys = [s["key"] for s in (await http.get("/runs/n/series")).json()]
    assert "loss{split=a\ufffdb}" in keys and not any("\x00" in k for k in keys)
    assert (await http.get("/runs/n")).json()["name"] == "x\ufffdy"


async def test_a_run_of_absurdly_many_series_is_listed_a_page_at_a_time(server_url, http):
    names = [f"m{i}_{j}" for i in range(40) for j in range(256)]  # a loop logging new names every step
    events = [make_event(Metrics(values={f"m{i}_{j}": 1.0 for j in range(256)}), run_id="w", seq=i + 1, ts=1.7e9,
                         step=i) for i in range(40)]
    await ingest_events(server_url, events, batch=20)
    first = await http.get("/runs/w/series")
    assert len(first.json()) == 10_000 and first.links["next"]["url"]
    keys, reply = [], await http.get("/runs/w/series", params={"limit": 3000})
    while True:
        keys += [s["key"] for s in reply.json()]
        if "next" not in reply.links:
            break
        reply = await http.get(reply.links["next"]["url"])
    assert sorted(keys) == sorted(names), "each series once (one rank: named as logged)"


@pytest.mark.single_backend
def test_a_websocket_handshake_with_a_line_over_8_kib_is_answered_not_left_hanging(server_url):
    host, port = server_url.split("//")[1].rsplit(":", 1)
    upgrade = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               "Sec-WebSocket-Version: 13\r\n")
    for head, status in ((f"GET /ws/watch?run_id={'a' * 9000} HTTP/1.1\r\nHost: x\r\n{upgrade}\r\n", b"414"),
                         (f"GET /ws/watch HTTP/1.1\r\nHost: x\r\nX-Big: {'b' * 9000}\r\n{upgrade}\r\n", b"431")):
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(head.encode())
            answer = b"".join(iter(lambda: sock.recv(65536), b""))  # until the server closes
        assert answer.startswith(b"HTTP/1.1 " + status) and b"expected no more than 8192 bytes" in answer, answer[:200]
    assert httpx.get(f"{server_url}/healthz", timeout=30).json()["status"] == "ok"


HARD_X = {"one step": np.zeros(60), "two steps": np.repeat([0.0, 1.0], 30),
          "steps near 2**62": 2.0**62 + np.repeat([0.0, 1024.0, 2048.0, 4096.0], 15),
          "x of either sign near the largest float": np.repeat([-1.7e308, 0.0, 1.7e308], 20),
          "x from 0 to 1e300": np.repeat([0.0, 1e-300, 1.0, 1e300], 15), "subnormal x": np.arange(60) * 5e-324}


@pytest.mark.single_backend
@pytest.mark.parametrize("x", HARD_X.values(), ids=HARD_X.keys())
def test_downsampling_keeps_the_extremes_on_any_x(x):
    y = np.sin(np.arange(60.0))
    kept_x, kept_y = downsample(x, y, 10)
    assert 2 <= len(kept_x) <= 10 and bool(np.all(kept_x[1:] >= kept_x[:-1]))
    assert y.max() in kept_y and y.min() in kept_y, "a spike never disappears"
    y[7] = np.nan
    assert np.isnan(downsample(x, y, 10)[1]).any(), "a bucket with a NaN shows it"


@pytest.mark.single_backend
def test_downsampling_keeps_a_spike_at_the_last_step():
    x = np.arange(2003) * 16.0  # a step every 16 batches: the edges' rounding once dropped the newest point
    y = np.zeros(2003)
    y[-1] = 1.0
    assert 1.0 in downsample(x, y, 2000)[1]


async def test_a_chart_of_values_logged_at_one_step_is_drawn(server_url, http):
    events = [make_event(Metrics(values={"loss": float(i % 7)}), run_id="z", seq=i + 1, ts=1.7e9, step=0)
              for i in range(30)]  # a loop that never sets the step
    await ingest_events(server_url, events)
    reply = await http.get("/runs/z/series/loss", params={"max_points": 10})
    assert reply.status_code == 200, reply.text
    assert sorted(reply.json()["series"][0]["y"]) == [0.0, 6.0] and reply.json()["series"][0]["points"] == 30


async def test_a_call_with_an_int_past_64_bits_is_refused_with_the_reason(server_url, http):
    declared = [CommandSpec(name="set_batch", args=[ArgSpec(name="size", type="int")])]
    started = make_event(msgspec.structs.replace(SAMPLE_PAYLOADS[EventKind.RUN_STARTED], commands=declared),
                         run_id="c", seq=1, ts=1.7e9, step=0)
    async with IngestClient(server_url, "c") as client:
        await client.send([started])
        await client.wait_ack(1)
        for size, status in ((2**63, 422), (-(2**63) - 1, 422), (2**63 - 1, 202)):
            body = f'{{"run_id": "c", "action": "call", "name": "set_batch", "args": {{"size": {size}}}}}'
            reply = await http.post("/escalate", content=body, headers={"content-type": "application/json"})
            assert reply.status_code == status, (size, reply.text)
        assert "must be an int of 64 bits" in (await http.post("/escalate", content=body.replace(
            str(2**63 - 1), str(10**30)))).json()["detail"]


async def test_a_name_of_more_label_sets_than_a_reply_holds_is_refused_and_chosen_with_labels(server_url, http):
    events = [make_event(Metrics(values={"loss": float(i)}, labels={"id": str(i)}), run_id="l", seq=i + 1, ts=1.7e9,
                         step=i) for i in range(MAX_SERIES + 1)]  # a loop that labels each step
    await ingest_events(server_url, events)
    refused = await http.get("/runs/l/series/loss")
    assert refused.status_code == 422 and f"{MAX_SERIES + 1} series are called 'loss'" in refused.json()["detail"]
    chosen = (await http.get("/runs/l/series/loss", params={"labels": "id=7"})).json()["series"]
    assert [(s["labels"]["id"], s["y"]) for s in chosen] == [("7", [7.0])]


async def test_labels_name_any_label_value_with_backslash_escapes(server_url, http):
    # A value holding a comma or an equals sign could not be chosen: the list was split at every comma.
    values = ["a,b", "k=v", "back\\slash", "a"]
    await ingest_events(server_url, [make_event(Metrics(values={"loss": float(i)}, labels={"data": v}), run_id="esc",
                                                seq=i + 1, ts=1.7e9, step=i) for i, v in enumerate(values)])
    for i, v in enumerate(values):
        escaped = v.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
        chosen = (await http.get("/runs/esc/series/loss", params={"labels": f"data={escaped}, rank=0"})).json()
        assert [(s["labels"]["data"], s["y"]) for s in chosen["series"]] == [(v, [float(i)])], v
    bad = await http.get("/runs/esc/series/loss", params={"labels": "data\\=a"})
    assert bad.status_code == 422 and "is not name=value" in bad.text
