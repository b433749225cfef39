"""The console's REST client against a real server: paging across ranks, refusals with reasons."""

from __future__ import annotations

import pytest

from leyline import DebugRequest, Heartbeat
from tests.support.server import running_server
from tests.tui.producer import scripted_trainer
from tui.client import ApiError, ClientConfig, NissaClient


async def test_all_events_pages_through_every_rank(tmp_path):
    with running_server(tmp_path) as url:
        async with scripted_trainer(url, "run-mr", rank=0) as r0, scripted_trainer(url, "run-mr", rank=1) as r1:
            await r0.emit(*(Heartbeat(uptime_s=float(i)) for i in range(60)))
            await r1.emit(*(Heartbeat(uptime_s=float(i)) for i in range(45)))
            client = NissaClient(ClientConfig(url))
            try:
                events = await client.all_events("run-mr", max_events=10_000, page=25)
                assert sorted((e.rank, e.seq) for e in events) == sorted(
                    [(0, s) for s in range(1, 61)] + [(1, s) for s in range(1, 46)])
                assert len(await client.all_events("run-mr", max_events=70, page=25)) == 70
            finally:
                await client.aclose()


async def test_refusals_carry_the_servers_reason(tmp_path):
    with running_server(tmp_path) as url:
        client = NissaClient(ClientConfig(url))
        try:
            with pytest.raises(ApiError) as info:
                await client.escalate(DebugRequest(run_id="nope", epochs=2))
            assert info.value.status == 404 and info.value.reason
            with pytest.raises(ApiError) as info:
                await client.escalate(DebugRequest(run_id="nope", epochs=100_000))  # the server's bounds
            assert info.value.status == 422 and "epochs" in info.value.reason
        finally:
            await client.aclose()
    unreachable = NissaClient(ClientConfig("http://127.0.0.1:9", timeout_s=2))
    try:
        with pytest.raises(ApiError) as info:
            await unreachable.list_runs()
        assert info.value.status == 0 and "cannot reach" in info.value.reason
    finally:
        await unreachable.aclose()


def test_client_config_is_validated():
    with pytest.raises(ValueError, match="--server"):
        ClientConfig("127.0.0.1:8765")
    cfg = ClientConfig("https://nissa.example:8443/", token="t")
    assert cfg.ws_base == "wss://nissa.example:8443" and cfg.headers == {"Authorization": "Bearer t"}


async def test_series_follows_the_link_to_the_rest_of_a_reply_that_holds_a_page(tmp_path):
    from leyline import Metrics, make_event
    from tests.support import ingest_events

    events = [make_event(Metrics(values={"loss": float(i)}, labels={"i": str(i)}), run_id="paged", seq=i + 1,
                         ts=1.7e9 + i, step=i, epoch=0) for i in range(60)]
    with running_server(tmp_path, max_page_bytes=4_000) as url:
        await ingest_events(url, events)
        client = NissaClient(ClientConfig(url))
        try:
            series = await client.series("paged", "loss", "step", 2000)
            assert sorted(s["y"][0] for s in series) == [float(i) for i in range(60)]
        finally:
            await client.aclose()
