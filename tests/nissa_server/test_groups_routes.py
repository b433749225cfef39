"""The runs tables' server side on both stores, with runs stored through the real client: a series' band
over runs (what the group charts draw), the diff of three configs, and their refusals."""

import httpx
import pytest

from tests.support.sweep import SweepRun, store_runs


def _runs(url, tmp_path):
    specs = [SweepRun(f"lr{lr}", lr, project=None, steps=5, extra={"width": 64}) for lr in (0.01, 0.1)]
    specs.append(SweepRun("wide", 0.1, seed=1, project=None, steps=3, extra={"width": 128, "dropout": 0.1}))
    return specs, store_runs(url, tmp_path / "runs", specs)


def test_band_over_runs_is_mean_min_max_at_each_step(server_url, tmp_path):
    specs, ids = _runs(server_url, tmp_path)
    runs = ",".join(ids.values())
    reply = httpx.get(f"{server_url}/run-groups/series/val_loss", params={"runs": runs}).json()
    assert reply["runs"] == list(ids.values()) and len(reply["bands"]) == 1
    band = reply["bands"][0]
    assert band["x"] == [1.0, 2.0, 3.0, 4.0, 5.0]  # run.step() before each log: steps 1..5
    for i, x in enumerate(band["x"]):
        values = [s.val_loss(int(x) - 1) for s in specs if int(x) <= s.steps]
        assert band["n"][i] == len(values)
        assert band["mean"][i] == pytest.approx(sum(values) / len(values))
        assert (band["min"][i], band["max"][i]) == (pytest.approx(min(values)), pytest.approx(max(values)))
    bad = httpx.get(f"{server_url}/run-groups/series/val_loss", params={"runs": "nope"})
    assert bad.status_code == 404 and "nope" in bad.json()["detail"]
    many = httpx.get(f"{server_url}/run-groups/series/val_loss", params={"runs": ",".join(f"r{i}" for i in range(201))})
    assert many.status_code == 422


def test_config_diff_of_three_runs(server_url, tmp_path):
    _, ids = _runs(server_url, tmp_path)
    order = [ids["wide"], ids["lr0.01"], ids["lr0.1"]]
    diff = httpx.get(f"{server_url}/config-diff", params={"runs": ",".join(order)}).json()
    assert diff["runs"] == order and diff["names"] == ["wide", "lr0.01", "lr0.1"]
    rows = {r["key"]: r["values"] for r in diff["rows"]}
    assert rows == {"dropout": ["0.1", None, None], "lr": ["0.1", "0.01", "0.1"], "seed": ["1", "0", "0"],
                    "width": ["128", "64", "64"]}
    assert diff["same"] == 1  # optimizer
    one = httpx.get(f"{server_url}/config-diff", params={"runs": ids["wide"]})
    assert one.status_code == 422 and "between 2" in one.json()["detail"]
