"""``/metrics`` measures the server itself: latency histograms, writer batches, process and runtime
metrics, runs and ranks by status, with bounded labels; Prometheus's own checker accepts the text."""

import asyncio
import re
import shutil
import subprocess

import httpx
import pytest

from tests.support import collect_watch, events_for, ingest_events

LABEL = re.compile(r'(\w+)="([^"]*)"')


@pytest.fixture
async def http(server_url):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as client:
        yield client


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the series ``name`` whose labels include ``labels``."""
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        if head.split("{")[0] == name and labels.items() <= dict(LABEL.findall(head)).items():
            return float(value)
    raise AssertionError(f"no {name} {labels} in /metrics")


async def _watchers(http: httpx.AsyncClient, n: int) -> None:
    while (await http.get("/healthz")).json()["watchers"] != n:
        await asyncio.sleep(0.01)


async def test_histograms_gauges_and_runtime_metrics(server_url, http):
    watch = asyncio.create_task(collect_watch(server_url, 30, run_id="hist-run"))
    await asyncio.wait_for(_watchers(http, 1), 30)
    await ingest_events(server_url, events_for("hist-run", 30, started=True), batch=10)
    await watch
    assert (await http.get("/runs/hist-run/events", params={"limit": 5})).status_code == 200
    assert (await http.get("/runs/no-such-run")).status_code == 404
    assert (await http.get("/no/such/path")).status_code == 404
    text = (await http.get("/metrics")).text

    assert sample(text, "nissa_ingest_commit_seconds_count") >= 3  # one per frame of 10
    assert sample(text, "nissa_watch_send_seconds_count") >= 1
    assert sample(text, "nissa_writer_batch_events_sum") >= 30
    assert sample(text, "nissa_writer_commit_seconds_count") >= 1
    assert sample(text, "nissa_event_loop_lag_seconds_count") >= 0
    route = "/runs/{run_id}/events"
    assert sample(text, "nissa_http_request_seconds_count", route=route, method="GET", status="2xx") == 1
    assert sample(text, "nissa_http_request_seconds_count", route="/runs/{run_id}", status="4xx") == 1
    assert sample(text, "nissa_http_request_seconds_count", route="unmatched", status="4xx") == 1
    assert sample(text, "nissa_runs", status="live") == 1
    assert sample(text, "nissa_ranks", status="live") == 1
    assert sample(text, "process_cpu_seconds_total") > 0
    assert sample(text, "python_gc_collections_total", generation="0") >= 0
    assert "python_info{" in text
    # No label carries a run id or a raw path.
    values = {value for line in text.splitlines() if not line.startswith("#") for _, value in LABEL.findall(line)}
    assert not any("hist-run" in v or "no-such-run" in v or "/no/such" in v for v in values), values


@pytest.mark.single_backend
async def test_promtool_accepts_the_metrics(server_url, http):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian's prometheus package; make test installs it where apt-get runs)")
    await ingest_events(server_url, events_for("prom-run", 5, started=True))
    assert (await http.get("/runs")).status_code == 200
    text = (await http.get("/metrics")).text
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
