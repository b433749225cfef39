"""The runs tables' server side on both stores, with runs stored through the real ingest: rows of groups
(count, mean ± SD), a series' band over runs (what the group charts draw), the diff of three configs, and
their refusals."""

import statistics

import httpx
import pytest

from tests.support.sweep import SweepRun, lr_sweep, mixed_ranks, store_runs


def _runs(url, tmp_path):
    specs = [SweepRun(f"lr{lr}", lr, steps=5, extra={"width": 64}) for lr in (0.01, 0.1)]
    specs.append(SweepRun("wide", 0.1, seed=1, steps=3, extra={"width": 128, "dropout": 0.1}))
    return specs, store_runs(url, specs)


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


def test_a_band_over_runs_of_one_rank_and_of_two_is_one_band_of_rank_0s_series(server_url):
    ids = store_runs(server_url, mixed_ranks(steps=3))
    reply = httpx.get(f"{server_url}/run-groups/series/val_loss", params={"runs": ",".join(ids.values())}).json()
    bands = {band["key"]: band for band in reply["bands"]}
    assert sorted(bands) == ["val_loss", "val_loss{rank=1}"]
    assert bands["val_loss"]["n"] == [2, 2, 2] and bands["val_loss{rank=1}"]["n"] == [1, 1, 1]


def test_config_diff_of_three_runs(server_url, tmp_path):
    _, ids = _runs(server_url, tmp_path)
    order = [ids["wide"], ids["lr0.01"], ids["lr0.1"]]
    diff = httpx.get(f"{server_url}/config-diff", params={"runs": ",".join(order)}).json()
    assert diff["runs"] == order and diff["names"] == ["wide", "lr0.01", "lr0.1"]
    rows = {r["key"]: r["values"] for r in diff["rows"]}
    assert rows == {"dropout": ["0.1", None, None], "lr": ["0.1", "0.01", "0.1"], "seed": ["1", "0", "0"],
                    "width": ["128", "64", "64"]}
    assert diff["same"] == 1  # optimizer
    one = httpx.get(f"{server_url}/config-diff", params={"runs": f"{ids['wide']},{ids['wide']}"}).json()
    assert one["runs"] == [ids["wide"]] and one["rows"] == [] and one["same"] == 5, "one run: nothing differs"
    many = httpx.get(f"{server_url}/config-diff", params={"runs": ",".join(["x"] * 51)})
    assert many.status_code == 422


def test_group_rows_are_count_mean_and_sd_of_each_metric(server_url):
    specs = [*lr_sweep(), SweepRun("other", 0.5, project="mnist", steps=3, extra={"flag": True})]
    ids = store_runs(server_url, specs)
    reply = httpx.get(f"{server_url}/run-groups", params={"by": "config.lr", "metrics": "val_loss.best,loss.last"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["by"] == "config.lr" and body["runs"] == 7
    rows = {g["value"]: g for g in body["groups"]}
    assert list(rows) == [0.001, 0.01, 0.1, 0.5]
    for lr in (0.001, 0.01, 0.1):
        mine = [s for s in specs if s.lr == lr]
        best = [min(s.val_loss(i) for i in range(s.steps)) for s in mine]
        last = [2 * s.val_loss(s.steps - 1) for s in mine]
        row = rows[lr]
        assert row["count"] == 2 and sorted(row["run_ids"]) == sorted(ids[s.name] for s in mine)
        stats = row["metrics"]["val_loss.best"]
        assert stats["n"] == 2 and stats["mean"] == pytest.approx(statistics.fmean(best))
        assert stats["sd"] == pytest.approx(statistics.stdev(best)) and stats["min"] == pytest.approx(min(best))
        assert row["metrics"]["loss.last"]["mean"] == pytest.approx(statistics.fmean(last))
    assert rows[0.5]["metrics"]["val_loss.best"]["sd"] is None, "one run: no standard deviation"

    by_group = httpx.get(f"{server_url}/run-groups", params={"by": "group", "q": "project:cifar,mnist"}).json()
    assert [(g["value"], g["count"]) for g in by_group["groups"]] == [("lr-sweep", 6), (None, 1)]
    only = httpx.get(f"{server_url}/run-groups", params={"by": "config.flag", "q": "config.lr>=0.1"}).json()
    assert only["runs"] == 3 and [(g["value"], g["count"]) for g in only["groups"]] == [("true", 1), (None, 2)]
    seeds = httpx.get(f"{server_url}/run-groups", params={"by": "config.seed", "q": "tag:sweep"}).json()
    assert [(g["value"], g["count"]) for g in seeds["groups"]] == [(0, 3)], "an integer stays one"
    for params, status, words in (({"by": "name"}, 422, "by"), ({"by": "group", "q": "lr>="}, 400, "q: position"),
                                  ({"by": "group", "metrics": "config.lr"}, 400, "not a metric")):
        bad = httpx.get(f"{server_url}/run-groups", params=params)
        assert bad.status_code == status and words in bad.json()["detail"], bad.text
