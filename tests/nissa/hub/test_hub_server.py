"""NissaHub against a real nissa-server (in-process uvicorn on 127.0.0.1:0): delivery, acks,
commands into the inbox, and a fresh server database filled again from the run log."""

from __future__ import annotations

import pathlib
import socket
import time

import httpx
import pytest

from leyline import CommandStatus, DebugRequest, EventKind, decode_events
from leyline.esper import SeedGerminated
from nissa.hub import HubConfig, NissaHub
from tests.support.server import running_server
from tests.support.waiting import wait_for


def _seed(i: int) -> SeedGerminated:
    return SeedGerminated(slot="r0c0", seed_id=f"s{i}", blueprint="conv", params=1)


def _stored(url: str, run_id: str) -> list:
    resp = httpx.get(f"{url}/runs/{run_id}/events", params={"rank": 0, "limit": 5000}, timeout=10)
    resp.raise_for_status()
    return decode_events(resp.content)


def test_hub_delivers_everything_and_close_reports_nothing_left(tmp_path):
    with running_server(tmp_path) as url:
        hub = NissaHub(HubConfig(run_id="live", log_dir=tmp_path / "runs", server=url)).start()
        for i in range(500):
            hub.emit(_seed(i), step=i, epoch=0)
        report = hub.close(timeout=30)
        assert report.complete and report.acked == report.logged == len(_stored(url, "live"))


def test_a_command_reaches_the_inbox_once_and_is_reported_delivered(tmp_path):
    with running_server(tmp_path) as url:
        hub = NissaHub(HubConfig(run_id="cmd", log_dir=tmp_path / "runs", server=url)).start()
        hub.emit(_seed(0), step=1, epoch=1)
        hub.flush(timeout=30)
        hub.mark_position(42, 3)
        resp = httpx.post(f"{url}/escalate", json={"run_id": "cmd", "action": "debug", "epochs": 2}, timeout=10)
        assert resp.status_code == 202, resp.text
        command_id = resp.json()["command_id"]
        got: list = []
        wait_for(lambda: got.extend(hub.poll_commands()) or got, timeout=30, message="the command in the inbox")
        assert [(c.command_id, c.request) for c in got] == [(command_id, DebugRequest(run_id="cmd", epochs=2))]
        hub.flush(timeout=30)
        delivered = [e for e in _stored(url, "cmd") if e.kind is EventKind.COMMAND_STATUS]
        assert [(e.payload.status, e.step, e.epoch) for e in delivered] == [(CommandStatus.DELIVERED, 42, 3)]
        record = httpx.get(f"{url}/commands/{command_id}", timeout=10).json()
        assert record["status"] == "delivered"
        hub.close(timeout=10)
        assert hub.poll_commands() == []


def test_a_server_that_lost_its_database_gets_the_whole_log_again(tmp_path):
    log_dir = tmp_path / "runs"
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    with running_server(tmp_path / "a") as url:
        hub = NissaHub(HubConfig(run_id="again", log_dir=log_dir, server=url)).start()
        for i in range(100):
            hub.emit(_seed(i), step=i, epoch=0)
        first = hub.close(timeout=30)
    assert first.complete
    with running_server(tmp_path / "b") as url:  # a new, empty database
        hub = NissaHub(HubConfig(run_id="again", log_dir=log_dir, server=url)).start()  # same run, same log
        hub.emit(_seed(100), step=100, epoch=0)
        report = hub.close(timeout=30)
        stored = _stored(url, "again")
    assert report.complete and report.logged == first.logged + 1
    assert [e.seq for e in stored] == list(range(1, report.logged + 1))


def test_a_list_of_servers_is_tried_in_turn(tmp_path):
    with socket.socket() as closed:  # a port nothing listens on: the first server of the list is down
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}"
    with running_server(tmp_path) as url:
        config = HubConfig(run_id="listed", log_dir=tmp_path / "runs", server=f"{dead}, {url}")
        assert config.ws_urls == [f"{dead.replace('http', 'ws')}/ws/ingest", f"{url.ws}/ws/ingest"]
        hub = NissaHub(config).start()
        for i in range(50):
            hub.emit(_seed(i), step=i, epoch=0)
        report = hub.close(timeout=30)
        assert report.complete and report.acked == len(_stored(url, "listed"))


def test_every_server_of_a_list_is_checked():
    with pytest.raises(ValueError, match="--server: expected http://host:port, got 'ftp://b'"):
        HubConfig(run_id="r", log_dir=pathlib.Path("."), server="http://a:1,ftp://b")
    with pytest.raises(ValueError, match="--server: expected"):
        HubConfig(run_id="r", log_dir=pathlib.Path("."), server=" , ")


def _frames_received(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return float(next(line.split()[-1] for line in text.splitlines()
                      if line.startswith("nissa_ingest_commit_seconds_count")))


def test_events_logged_meanwhile_gather_into_one_frame(tmp_path):
    with running_server(tmp_path) as url:
        hub = NissaHub(HubConfig(run_id="gather", log_dir=tmp_path / "runs", server=url, send_linger_s=0.5)).start()
        hub.flush(timeout=30)  # connected; what the hub says on its own at start is out of the way
        before = _frames_received(url)
        for i in range(100):  # over ~100 ms: dozens of log writes, sent as one frame (two at a boundary)
            hub.emit(_seed(i), step=i, epoch=0)
            time.sleep(0.001)
        report = hub.close(timeout=30)
        assert report.complete and len(_stored(url, "gather")) == report.logged
        assert _frames_received(url) - before <= 3
