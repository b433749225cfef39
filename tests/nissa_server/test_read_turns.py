"""Reads take turns without holding each other up: a run's read in progress leaves other runs' reads to go on, a
client asking more at once than its share is answered 429 (ingest and /healthz untouched), a run's uncharted tail
is charted by the series pass rather than by each read, ``nissa_series_waiting_events`` counts what is not
charted, and a run's reply says when it cut its summaries."""

from __future__ import annotations

import asyncio
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from leyline import Metrics, make_event
from nissa_server.routes import series as series_routes
from nissa_server.store import pages, queries, series_queries
from nissa_server.store.series_sql import SeriesWriter
from tests.e2e.api import wait_for
from tests.support import running_server
from tests.support.clients import IngestClient, http_get


def _metrics(run_id: str, n: int, names: int = 1, start: int = 1) -> list:
    return [make_event(Metrics(values={f"m{j}" if names > 1 else "loss": seq / 10 + j for j in range(names)}),
                       run_id=run_id, seq=seq, ts=1.7e9 + seq, step=seq) for seq in range(start, start + n)]


async def _ingest(url: str, run_id: str, n: int, names: int = 1) -> None:
    async with IngestClient(url, run_id) as client:
        await client.send(_metrics(run_id, n, names))
        await client.wait_ack(n)


def _waiting(url: str) -> float:
    found = re.search(r"^nissa_series_waiting_events (\S+)$", http_get(f"{url}/metrics").text, re.M)
    assert found is not None
    return float(found.group(1))


class _Entered:
    """How many held reads have begun, waited on from the test's thread."""

    def __init__(self) -> None:
        self._begun, self._changed = 0, threading.Condition()

    def add(self) -> None:
        with self._changed:
            self._begun += 1
            self._changed.notify_all()

    def wait(self, n: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._begun >= n, timeout)


def _held(monkeypatch, *run_ids: str) -> tuple[_Entered, threading.Event]:
    """Series reads of ``run_ids`` wait on their reader thread until the event is set (``_Entered`` counts those
    that have begun)."""
    entered, release = _Entered(), threading.Event()
    real = series_routes.read_page

    def read_page(conn, rid, *args):
        if rid in run_ids:
            entered.add()
            assert release.wait(60)
        return real(conn, rid, *args)

    monkeypatch.setattr(series_routes, "read_page", read_page)
    return entered, release


def test_a_runs_read_in_progress_leaves_other_runs_reads_to_go_on(tmp_path, monkeypatch):
    entered, release = _held(monkeypatch, "wide")
    with running_server(tmp_path) as url, ThreadPoolExecutor(3) as pool:
        asyncio.run(_ingest(url, "wide", 20))
        asyncio.run(_ingest(url, "other", 1))
        try:
            held = [pool.submit(httpx.get, f"{url}/runs/wide/series/loss", timeout=60) for _ in range(2)]
            assert entered.wait(1, 30)
            other = http_get(f"{url}/runs/other/series/loss", timeout=20)  # not behind the wide run's reads
            assert other.status_code == 200 and other.json()["series"][0]["y"] == [0.1]
            assert http_get(f"{url}/runs/other", timeout=20).status_code == 200
        finally:
            release.set()
        assert [len(r.result().json()["series"][0]["y"]) for r in held] == [20, 20]


def test_a_client_asking_more_than_its_share_at_once_is_answered_429(tmp_path, monkeypatch):
    # Two runs' reads, each begun (one run's would wait for the other's turn, and were it not yet counted when
    # the test asked, the test's own read would take the share and the held one be refused instead).
    entered, release = _held(monkeypatch, "busy", "busy2")
    with running_server(tmp_path, reads_per_client=2) as url, ThreadPoolExecutor(2) as pool:
        for run_id in ("busy", "busy2"):
            asyncio.run(_ingest(url, run_id, 5))
        try:
            held = [pool.submit(httpx.get, f"{url}/runs/{run_id}/series/loss", timeout=60)
                    for run_id in ("busy", "busy2")]
            assert entered.wait(2, 30)
            assert http_get(f"{url}/runs").status_code == 429
            refused = http_get(f"{url}/runs/busy/series/loss")
            assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
            assert "reads in progress or waiting" in refused.json()["detail"]
            assert http_get(f"{url}/healthz").status_code == 200  # never limited: health, ingest, watchers
            asyncio.run(_ingest(url, "trainer", 10))
            assert http_get(f"{url}/runs/trainer/events", params={"limit": 100}).status_code == 429  # a costly read
        finally:
            release.set()
        assert [r.result().status_code for r in held] == [200, 200]
        assert http_get(f"{url}/runs").status_code == 200  # its share back once its reads are answered
        assert len(http_get(f"{url}/runs/trainer/events", params={"limit": 100}).json()) == 10


def test_a_client_asking_many_pages_of_events_at_once_is_answered_429(tmp_path, monkeypatch):
    """A page of events is up to 8 MiB: 30 asked at once from one address held the server's memory and its
    loop. A client's share of them is read, the rest answered 429, and another client is served meanwhile."""
    entered, release = threading.Event(), threading.Event()
    real = pages.events_page

    def events_page(conn, *args):
        entered.set()
        assert release.wait(60)
        return real(conn, *args)

    monkeypatch.setattr(pages, "events_page", events_page)
    with running_server(tmp_path, reads_per_client=4) as url, ThreadPoolExecutor(12) as pool:
        asyncio.run(_ingest(url, "big", 20))
        try:
            asked = [pool.submit(httpx.get, f"{url}/runs/big/events", params={"limit": 1000}, timeout=120)
                     for _ in range(12)]
            assert entered.wait(60)
            refused = wait_for(lambda: (done := [a.result() for a in asked if a.done()]) and len(done) >= 8 and done,
                               60, "the client's share taken")
            assert [r.status_code for r in refused] == [429] * 8
            assert {r.headers["retry-after"] for r in refused} == {"1"}
            other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30)
            with other:  # another address: not this client's share, and its costly read is answered meanwhile
                assert other.get(f"{url}/healthz").json()["status"] == "ok"
                assert [r["run_id"] for r in other.get(f"{url}/runs").json()] == ["big"]
        finally:
            release.set()
        answered = [a.result() for a in asked if a.result().status_code == 200]
        assert len(answered) == 4 and all(len(r.json()) == 20 for r in answered)


def test_the_waiting_events_are_counted_while_a_pass_writes_them(tmp_path, monkeypatch):
    entered, release = threading.Event(), threading.Event()
    real = SeriesWriter.write_pass

    def write_pass(self, conn, mark, end, rows, **kwargs):
        entered.set()
        assert release.wait(60)
        return real(self, conn, mark, end, rows, **kwargs)

    monkeypatch.setattr(SeriesWriter, "write_pass", write_pass)
    with running_server(tmp_path, series_interval_s=0.2) as url:
        try:
            asyncio.run(_ingest(url, "behind", 30))
            assert entered.wait(30)
            assert _waiting(url) >= 30  # the pass has taken them, and not written them yet
        finally:
            release.set()
        wait_for(lambda: _waiting(url) == 0, 30, "the series pass done")


def test_a_long_uncharted_tail_is_charted_by_the_pass_not_by_each_read(tmp_path, monkeypatch):
    monkeypatch.setattr(series_queries, "TAIL_BYTES", 1000, raising=False)  # old code: none
    with running_server(tmp_path, series_interval_s=3600) as url:  # no pass of its own meanwhile
        asyncio.run(_ingest(url, "long", 50))
        assert _waiting(url) == 50
        reply = http_get(f"{url}/runs/long/series/loss").json()
        assert len(reply["series"][0]["y"]) == 50
        assert _waiting(url) == 0  # charted once, by the pass; the next reads read rows
        listed = http_get(f"{url}/runs/long/series").json()
        assert [s["points"] for s in listed] == [50]


def test_a_runs_reply_says_it_cut_its_summaries(tmp_path, monkeypatch):
    monkeypatch.setattr(queries, "MAX_METRICS", 5)
    with running_server(tmp_path) as url:
        asyncio.run(_ingest(url, "wide", 2, names=8))
        asyncio.run(_ingest(url, "narrow", 2, names=3))
        wide = wait_for(lambda: (r := http_get(f"{url}/runs/wide").json())["metrics"] and r, 30, "the summaries")
        assert [k.split("{")[0] for k in sorted(wide["metrics"])] == [f"m{j}" for j in range(5)]
        assert wide["metrics_truncated"] is True
        narrow = wait_for(lambda: (r := http_get(f"{url}/runs/narrow").json())["metrics"] and r, 30, "summaries")
        assert len(narrow["metrics"]) == 3 and narrow["metrics_truncated"] is False
