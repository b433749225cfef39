"""Hub configuration: server URLs, validation, backoff, rate-limited logging."""

from __future__ import annotations

import logging
import pathlib
import random

import pytest

from nissa.hub import BackoffConfig, HubConfig, ingest_url
from nissa.hub.pacing import Gathering, backoff_delay
from nissa.hub.ratelog import RateLimitedLog
from tests.support.clock import ManualClock


@pytest.mark.parametrize(("server", "url"), [
    ("http://127.0.0.1:8765", "ws://127.0.0.1:8765/ws/ingest"),
    ("http://127.0.0.1:8765/", "ws://127.0.0.1:8765/ws/ingest"),
    ("https://nissa.example:443", "wss://nissa.example:443/ws/ingest"),
    ("ws://localhost:1/ws/ingest", "ws://localhost:1/ws/ingest"),
    ("http://[::1]:9000/prefix", "ws://[::1]:9000/prefix/ws/ingest"),
])
def test_ingest_url_is_derived_from_the_server_url(server, url):
    assert ingest_url(server) == url


@pytest.mark.parametrize("server", ["127.0.0.1:8765", "ftp://h:1", "http://:80", "http://h:99999"])
def test_bad_server_urls_name_the_flag(server):
    with pytest.raises(ValueError, match="--server"):
        ingest_url(server)


def test_config_validates_on_construction(tmp_path):
    with pytest.raises(ValueError):
        HubConfig(run_id="r", log_dir=tmp_path, queue_size=0)
    with pytest.raises(ValueError):
        HubConfig(run_id="r", log_dir=tmp_path, rank=-1)
    with pytest.raises(ValueError):
        HubConfig(run_id="r", log_dir=tmp_path, rank=70_000)
    with pytest.raises(ValueError, match="run_id 'a run/1'"):
        HubConfig(run_id="a run/1", log_dir=tmp_path)
    for rank in (True, 1.0):  # would be logged as true / 1.0, which no decoder takes
        with pytest.raises(ValueError, match="rank"):
            HubConfig(run_id="r", log_dir=tmp_path, rank=rank)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        BackoffConfig(initial_s=2.0, max_s=1.0)
    cfg = HubConfig(run_id="r", log_dir=tmp_path, rank=3)
    assert cfg.log_path == tmp_path / "r" / "events.rank3.jsonl" and cfg.ws_url is None


def test_backoff_grows_is_capped_and_jittered():
    cfg = BackoffConfig(initial_s=0.1, max_s=2.0, factor=2.0, jitter=0.5)
    rng = random.Random(1)
    delays = [backoff_delay(cfg, n, rng) for n in range(30)]
    assert all(0.05 <= d <= 2.0 for d in delays)
    assert max(delays[:2]) <= 0.2 and min(delays[10:]) >= 1.0
    assert len({round(d, 6) for d in delays[10:]}) > 10  # jitter: reconnecting clients spread out


def test_rate_limited_log_holds_back_repeats(caplog):
    log = RateLimitedLog(logging.getLogger("t.ratelog"), interval_s=3600)
    with caplog.at_level(logging.WARNING, logger="t.ratelog"):
        results = [log.warning("k", "failed %d", i) for i in range(100)]
        log.warning("other", "another key")
    assert results.count(True) == 1
    assert [r.getMessage() for r in caplog.records] == ["failed 0", "another key"]


def test_gathering_sends_a_full_frame_at_once_a_partial_one_after_the_linger_or_once_acked():
    clock = ManualClock()
    gathering = Gathering(batch_events=10, linger_s=0.05, hold_s=0.2, clock=clock)
    assert gathering.wait_s(3, acked=0) == pytest.approx(0.05)
    assert gathering.wait_s(10, acked=0) == 0.0  # a frame's worth: now
    gathering.sent(10)
    assert gathering.wait_s(1, acked=0) == pytest.approx(0.05)  # the next frame starts its own linger
    clock.advance(0.04)
    assert gathering.wait_s(1, acked=0) == pytest.approx(0.01)
    clock.advance(0.01)
    assert gathering.wait_s(1, acked=0) == 0.0  # one frame in flight: the linger is enough
    gathering.sent(11)
    gathering.wait_s(1, acked=0)
    clock.advance(0.06)
    assert gathering.wait_s(1, acked=0) == pytest.approx(0.14)  # two in flight: held past the linger, for an ack
    assert gathering.wait_s(1, acked=10) == 0.0  # acked: out it goes
    gathering.sent(12)
    gathering.sent(13)
    gathering.wait_s(1, acked=10)
    clock.advance(0.19)
    assert gathering.wait_s(1, acked=10) == pytest.approx(0.01)
    clock.advance(0.01)
    assert gathering.wait_s(1, acked=10) == 0.0  # held no longer than hold_s
    with pytest.raises(ValueError, match="send_linger_s"):
        HubConfig(run_id="r", log_dir=pathlib.Path("."), send_linger_s=2.0)
