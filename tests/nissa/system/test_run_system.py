"""System metrics of a plain loop, on by default: sampled on a thread of their own into the run's stream,
stored by a real nissa-server as series under ``system.`` (listed as such, not as the loop's own metrics),
and usable in an alert rule; off with ``system_metrics=False``; a failing probe never reaches the loop."""

from __future__ import annotations

import logging
import threading

import httpx
import pytest

import nissa
from leyline import EventKind, decode_event
from nissa.system import SystemConfig, SystemSampler
from tests.e2e.api import trainer_events, wait_for
from tests.support.server import running_server


def _events(run: nissa.Run) -> list:
    return [decode_event(line) for line in run.log_path.read_bytes().splitlines()]  # type: ignore[attr-defined]


def test_a_run_streams_system_series_by_default(tmp_path):
    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="sys", log_dir=tmp_path / "runs", system_metrics_s=0.05)
        sampling = [t for t in threading.enumerate() if t.name == "nissa-system-r0"]
        assert sampling == []  # the sampler starts with the run's stream, after run_started
        for i in range(3):
            run.step()
            run.log({"loss": 1.0 / (i + 1)})
        assert [t.daemon for t in threading.enumerate() if t.name == "nissa-system-r0"] == [True]
        report = run.finish()
        assert report.complete
        assert not [t for t in threading.enumerate() if t.name == "nissa-system-r0"]
        events = trainer_events(url, run.run_id)
        assert events[0].kind is EventKind.RUN_STARTED and events[-1].kind is EventKind.RUN_FINISHED
        assert any(e.kind is EventKind.SYSTEM for e in events)  # the last sample at the latest, taken at finish
        listing = wait_for(lambda: [s for s in httpx.get(f"{url}/runs/{run.run_id}/series").json()
                                    if s["name"] == "system.memory.process_rss_bytes"], 30, "the system series")
        assert listing[0]["kind"] == "system" and listing[0]["labels"] == {}  # a run of one rank: no rank label
        reply = httpx.get(f"{url}/runs/{run.run_id}/series/system.memory.process_rss_bytes").json()
        assert reply["series"][0]["y"][-1] > 1e6


def test_system_metrics_off(tmp_path):
    run = nissa.init(run_name="quiet", log_dir=tmp_path, system_metrics=False)
    run.step()
    run.finish()
    assert not [e for e in _events(run) if e.kind is EventKind.SYSTEM]


def test_a_bad_interval_names_the_argument(tmp_path):
    with pytest.raises(ValueError, match="nissa.init: system_metrics_s: system metrics interval must be in"):
        nissa.init(run_name="x", log_dir=tmp_path, system_metrics_s=0)


def test_a_failing_probe_ends_sampling_not_the_loop(tmp_path, caplog):
    def broken() -> object:
        raise RuntimeError("psutil exploded")

    emitted: list = []
    sampler = SystemSampler(emitted.append, SystemConfig(interval_s=0.05), open_host=broken).start()
    with caplog.at_level(logging.ERROR, logger="nissa.system.sampler"):
        sampler.stop()
    assert emitted == [] and "system metrics stopped" in caplog.text
