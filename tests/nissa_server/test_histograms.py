"""``GET /runs/{run_id}/histograms/{name}`` on each store: a watched model's distributions over steps, as
``run.watch(model, histograms=…)`` sent them, downsampled over steps, and as CSV rows."""

from __future__ import annotations

import httpx
import torch

import nissa
from tests.e2e.api import wait_for


def test_a_watched_models_distributions_over_steps(tmp_path, server_url):
    run = nissa.init(server=server_url, run_name="hist", log_dir=tmp_path, system_metrics=False)
    model = torch.nn.Linear(4, 2)
    run.watch(model, histograms="parameters", every=1, bins=8)
    for _ in range(12):
        run.step()
    report = run.finish(timeout=120)  # a loaded machine may take longer than the default 10 s to deliver
    assert report.complete
    url = f"{server_url}/runs/{run.run_id}/histograms/parameters/weight"
    reply = wait_for(lambda: (r := httpx.get(url).json())["taken"] == 11 and r, 30, "the histograms")
    assert [h["step"] for h in reply["histograms"]] == list(range(11))  # each at the end of its step (0 to 10)
    first = reply["histograms"][0]
    assert first["count"] == 8 and sum(first["bins"]) == 8 and len(first["bins"]) == 8
    assert first["min"] == torch.min(model.weight).item() and first["rank"] == 0
    assert reply["quantiles"] == [0.0, 0.07, 0.16, 0.31, 0.5, 0.69, 0.84, 0.93, 1.0]
    q = first["quantiles"]
    assert q[0] == first["min"] and q[-1] == first["max"] and q == sorted(q)  # the bands a chart draws
    few = httpx.get(url, params={"max_steps": 3}).json()
    assert [h["step"] for h in few["histograms"]] == [0, 5, 10] and few["taken"] == 11  # spread, ends kept
    rows = httpx.get(url, params={"format": "csv", "max_steps": 1}).text.splitlines()
    assert rows[0] == "rank,step,ts,bin,low,high,count" and len(rows) == 1 + 8 and rows[1].startswith("0,10,")
    assert httpx.get(f"{server_url}/runs/{run.run_id}/histograms/nothing").json()["histograms"] == []
    assert httpx.get(f"{server_url}/runs/nope/histograms/x").status_code == 404


def test_a_debug_windows_layers_are_distributions_over_steps(tmp_path, server_url):
    """A debug window of ``run.watch`` sends each layer's gradient and weight distributions beside its
    ``debug_layer_stats``: one chart a layer, read like any distribution."""
    import time

    from leyline import Command, DebugRequest

    run = nissa.init(server=server_url, run_name="debug-hist", log_dir=tmp_path, system_metrics=False)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    run.watch(model, name="mlp")
    run.runtime.commands.submit(Command(command_id="debug-1", request=DebugRequest(run_id=run.run_id, epochs=3),
                                        created_at=time.time()))
    x = torch.randn(16, 4)
    for _ in range(5):
        with run.step():
            model.zero_grad()
            model(x).pow(2).mean().backward()
    assert run.finish(timeout=120).complete
    base = f"{server_url}/runs/{run.run_id}/histograms/debug/mlp"
    grads = wait_for(lambda: (r := httpx.get(f"{base}/gradients/0.weight").json())["taken"] == 3 and r, 30,
                     "the debug window's distributions")
    assert [h["count"] for h in grads["histograms"]] == [32] * 3 and len(grads["histograms"][0]["bins"]) == 32
    weights = httpx.get(f"{base}/weights/2.bias").json()["histograms"]
    assert [h["step"] for h in weights] == [h["step"] for h in grads["histograms"]] and weights[0]["count"] == 1
    series = {(s["name"], s["labels"].get("histogram")) for s in httpx.get(
        f"{server_url}/runs/{run.run_id}/series").json()}
    assert ("histogram.histograms.count", "debug/mlp/gradients/2.weight") in series  # how a viewer finds them
    kinds = [e["kind"] for e in httpx.get(f"{server_url}/runs/{run.run_id}/events").json()]
    assert kinds.count("debug_layer_stats") == 3  # kept as they were
