"""A sweep stored through the real client (``nissa.init`` with project, group, tags, notes, directions and values
set outright) and read back on a real server through ``nissa.Api`` and the ``nissa runs`` command."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

import nissa
import nissa.api
from leyline import MetricSummary, RunDetail, RunSummary
from tests.support import running_server
from tests.support.waiting import wait_for

STEPS = 30


def _val_loss(lr: float, step: int) -> float:
    return 1.0 / (1.0 + lr * 100 * step)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    with running_server(tmp, series_interval_s=0.05) as url:
        ids = {}
        for lr in (0.001, 0.01, 0.1):
            run = nissa.init(server=url, run_name=f"lr{lr}", log_dir=tmp / "runs", config={"lr": lr, "opt": "sgd"},
                             project="cifar", group="lr-sweep", tags=["sweep"], notes=f"lr {lr}",
                             summary={"score": "max"})
            run.define_metric("wobble", "min")
            for step in range(STEPS):
                run.step()
                run.log({"val_loss": _val_loss(lr, step), "score": -abs(step - 10), "wobble": (step % 7) - 3.0})
            run.define_metric("lr_now", "max")  # after the start: its own event
            run.log({"lr_now": lr})
            run.summary["test_acc"] = 1 - lr
            assert run.summary["test_acc"] == 1 - lr
            run.finish()
            ids[lr] = run.run_id
        api = nissa.Api(url)
        wait_for(lambda: all("test_acc" in r.metrics and r.metrics["val_loss"].count == STEPS
                             for r in api.runs(q="group:lr-sweep")) and len(api.runs()) == 3,
                 timeout=60, message="the sweep summarised")
        yield url, api, ids
        api.close()


def test_init_carries_project_group_tags_notes_and_directions(sweep):
    _, api, ids = sweep
    run = api.run(ids[0.01])
    assert type(run) is RunDetail and {type(r) for r in api.runs()} == {RunSummary}, "the contract's own rows"
    assert (run.project, run.group, run.tags, run.notes) == ("cifar", "lr-sweep", ["sweep"], "lr 0.01")
    assert run.config == {"lr": 0.01, "opt": "sgd"}
    assert run.metrics["score"].best == 0, "declared max at init"
    assert run.metrics["wobble"].best == -3, "declared min before the first step"
    assert run.metrics["lr_now"].best == 0.01
    assert run.metrics["test_acc"] == MetricSummary(last=0.99, min=0.99, max=0.99, best=0.99, count=1,
                                                            step=STEPS - 1)  # the loop's last step
    assert run.metrics["val_loss"].best == pytest.approx(_val_loss(0.01, STEPS - 1))


def test_runs_sorted_by_best_val_loss_and_paged(sweep, monkeypatch):
    _, api, ids = sweep
    best = api.runs(project="cifar", sort="val_loss.best")
    assert [r.run_id for r in best] == [ids[0.1], ids[0.01], ids[0.001]]
    monkeypatch.setattr(nissa.api, "PAGE", 2)  # three runs in pages of two
    assert [r.run_id for r in api.runs(q="tag:sweep", sort="-config.lr")] == [ids[0.1], ids[0.01], ids[0.001]]
    assert [r.run_id for r in api.runs(sort="config.lr", limit=1)] == [ids[0.001]]
    assert api.runs(q="config.lr>0.5") == []
    with pytest.raises(nissa.api.ApiError, match="position 9"):
        api.runs(q="val_loss<x")


def test_runs_frame(sweep):
    _, api, ids = sweep
    frame = api.runs_frame(group="lr-sweep", sort="val_loss.best")
    assert list(frame["id"]) == [ids[0.1], ids[0.01], ids[0.001]]
    assert list(frame["config.lr"]) == [0.1, 0.01, 0.001]
    assert frame["val_loss.best"].is_monotonic_increasing and set(frame["tags"]) == {"sweep"}
    assert "test_acc.last" in frame.columns
    # The loop's own series, as it named them; the runs' machinery only when asked.
    own = {c.rsplit(".", 1)[0] for c in frame.columns if c.endswith(".best")}
    assert own == {"val_loss", "score", "wobble", "lr_now", "test_acc"}, own
    everything = api.runs_frame(group="lr-sweep", internal=True)
    assert {"run_started.world_size.best", "run_finished.duration_s.best"} <= set(everything.columns)
    with pytest.raises(ValueError, match="not median"):
        api.runs_frame(stats=("best", "median"))


def test_history_is_every_point_paged(sweep, monkeypatch):
    _, api, ids = sweep
    monkeypatch.setattr(nissa.api, "EVENTS_PAGE", 7)
    points = api.history(ids[0.1], keys=["val_loss", "score{rank=0}"])  # a whole key, as stored or as shown
    assert sorted(points) == ["score", "val_loss"]
    assert points["val_loss"] == [(float(s), _val_loss(0.1, s)) for s in range(STEPS)]  # the loop's steps
    frame = api.history_frame(ids[0.1], keys=["val_loss"], x="ts")
    assert len(frame) == STEPS and list(frame.columns) == ["key", "ts", "value"]


def test_a_dataframe_without_pandas_says_so(sweep, monkeypatch):
    _, api, _ = sweep
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        api.runs_frame()


def _nissa(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nissa", *args], capture_output=True, text=True, timeout=120)


def test_the_nissa_command_and_the_query_api_import_no_torch(sweep):
    url, _, ids = sweep
    code = ("import sys; import nissa; from nissa.cli import main; "
            f"rc = main(['runs', '--server', {url!r}, '--format', 'json']); "
            f"api = nissa.Api({url!r}); found = [r.run_id for r in api.runs(q='project:cifar')]; "
            "print(rc, len(found), 'torch' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stderr.splitlines()[-1] == "0 3 False", done.stderr
    assert sorted(r["run_id"] for r in json.loads(done.stdout)) == sorted(ids.values())


# Its own timeout: four `nissa` processes took 114 s in all on two cores at load 8 to 18 (each importing torch
# then, before it asked the server anything), against the suite's 120 s.
@pytest.mark.timeout(480)
def test_the_nissa_command_gives_the_same_answer(sweep):
    url, _, ids = sweep
    done = _nissa("runs", "--server", url, "-q", "project:cifar group:lr-sweep", "--sort", "val_loss.best",
                  "--format", "csv")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert [r["id"] for r in rows] == [ids[0.1], ids[0.01], ids[0.001]]
    assert [r["config.lr"] for r in rows] == ["0.1", "0.01", "0.001"] and "config.opt" not in rows[0]
    assert float(rows[0]["val_loss.best"]) < float(rows[1]["val_loss.best"])
    table = _nissa("runs", "--server", url, "--sort=-val_loss.best", "--metric", "val_loss.min",
                   "--metric", "test_acc")
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["id", "name", "status", "project", "group", "tags", "config.lr", "val_loss.min",
                                "test_acc.best"]
    assert [line.split()[0] for line in lines[1:]] == [ids[0.001], ids[0.01], ids[0.1]]
    raw = json.loads(_nissa("runs", "--server", url, "--format", "json", "--limit", "1").stdout)
    assert len(raw) == 1 and raw[0]["project"] == "cifar"
    bad = _nissa("runs", "--server", url, "-q", "status:gone")
    assert bad.returncode == 1 and "unknown status 'gone'" in bad.stderr
