"""A lab's runs on a real server (both stores): project, group, tags, notes, every series summarised, the
filter language and sorts of ``GET /runs``, ``PATCH /runs/{id}``."""

import random
import string

import httpx
import pytest

from leyline import Metrics, RunFinished, RunStarted, SummaryUpdated, make_event, metric_value
from tests.support import IngestClient, running_server
from tests.support.waiting import async_wait_for

TOKEN = "s3cret-token"


def _run(run_id, *, lr, losses, project="cifar", group="lr-sweep", tags=(), notes="", summary=None, extra=()):
    started = RunStarted(name=f"sweep {run_id}", config={"lr": lr, "opt": "adam", "net.depth": 4, "amp": True},
                         project=project, group=group, tags=list(tags), notes=notes, summary=summary or {})
    events = [make_event(started, run_id=run_id, seq=1, ts=1.7e9)]
    for i, loss in enumerate(losses):
        values = {"val_loss": metric_value(loss), "val_acc": metric_value(1 - loss), "lr": lr}
        events.append(make_event(Metrics(values=values), run_id=run_id, seq=len(events) + 1, ts=1.7e9 + i, step=10 * i))
    for payload in extra:
        events.append(make_event(payload, run_id=run_id, seq=len(events) + 1, ts=1.7e9 + 500, step=999))
    events.append(make_event(RunFinished(status="completed", duration_s=1.0), run_id=run_id, seq=len(events) + 1,
                             ts=1.7e9 + 600, step=events[-1].step))
    return events


async def _store(url, run_id, events, token=None):
    async with IngestClient(url, run_id, token=token) as client:
        await client.send(events)
        await client.wait_ack(events[-1].seq)


async def _summarised(http, run_id, key, count):
    async def done():
        metrics = (await http.get(f"/runs/{run_id}")).json()["metrics"]
        return key in metrics and metrics[key]["count"] == count
    await async_wait_for(done, timeout=30, message=f"{run_id} summarised")


@pytest.fixture
async def lab(tmp_path):
    """A server with three runs of a sweep and one run of another project, summarised."""
    with running_server(tmp_path, series_interval_s=0.05, token=TOKEN) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            await _store(url, "a", _run("a", lr=0.1, losses=[0.9, 0.5, 0.7], tags=["baseline"]), TOKEN)
            await _store(url, "b", _run("b", lr=0.01, losses=[0.8, 0.3, 0.4], tags=["baseline", "best"],
                                        notes="the good one"), TOKEN)
            await _store(url, "c", _run("c", lr=0.001, losses=[0.95, 0.9, float("nan")],
                                        summary={"val_loss": "last"},
                                        extra=[SummaryUpdated(values={"test_acc": 0.91}, directions={"lr": "max"})]),
                         TOKEN)
            await _store(url, "d", _run("d", lr=0.5, losses=[2.0], project="mnist", group=""), TOKEN)
            for run_id, n in (("a", 3), ("b", 3), ("c", 3), ("d", 1)):
                await _summarised(http, run_id, "val_loss", n)
            await _summarised(http, "c", "test_acc", 1)
            yield url, http


async def _ids(http, **params):
    reply = await http.get("/runs", params=params)
    assert reply.status_code == 200, reply.text
    return [r["run_id"] for r in reply.json()]


async def test_every_series_is_summarised_with_its_direction(lab):
    _, http = lab
    b = (await http.get("/runs/b")).json()
    assert (b["project"], b["group"], b["tags"], b["notes"]) == ("cifar", "lr-sweep", ["baseline", "best"],
                                                                 "the good one")
    assert b["metrics"]["val_loss"] == {"last": 0.4, "min": 0.3, "max": 0.8, "best": 0.3, "count": 3,
                                                "step": 20}
    assert b["metrics"]["val_acc"]["best"] == pytest.approx(0.7), "an accuracy is maximised"
    assert b["metrics"]["lr"]["best"] == 0.01, "a name that hints nothing: its last value"
    c = (await http.get("/runs/c")).json()["metrics"]
    assert c["val_loss"] == {"last": None, "min": 0.9, "max": 0.95, "best": None, "count": 3, "step": 20}, \
        "declared 'last': the last point, NaN (no number)"
    assert c["test_acc"] == {"last": 0.91, "min": 0.91, "max": 0.91, "best": 0.91, "count": 1, "step": 999}
    assert c["lr"]["best"] == 0.001 and c["lr"]["max"] == 0.001
    listed = {r["run_id"]: r for r in (await http.get("/runs")).json()}
    assert listed["b"]["metrics"]["val_loss"] == b["metrics"]["val_loss"]
    assert listed["b"]["tags"] == ["baseline", "best"] and listed["d"]["project"] == "mnist"
    assert "run_finished.duration_s" in listed["a"]["metrics"], "every series, the end's too"
    only = (await http.get("/runs", params={"metrics": "val_loss", "q": "id:b"})).json()[0]["metrics"]
    assert list(only) == ["val_loss"]


@pytest.mark.parametrize(("q", "expected"), [
    ("", ["d", "c", "b", "a"]),
    ("project:cifar", ["c", "b", "a"]),
    ("project=mnist", ["d"]),
    ("project!=cifar", ["d"]),
    ("project~IFA", ["c", "b", "a"]),
    ("group:lr-sweep -tag:best", ["c", "a"]),
    ("tag:baseline", ["b", "a"]),
    ("tag:best,nothing", ["b"]),
    ("tag~bes", ["b"]),
    ("status:finished,lost", ["d", "c", "b", "a"]),
    ("status:live", []),
    ("name~SWEEP name~b", ["b"]),
    ("sweep", ["d", "c", "b", "a"]),
    ("notes~good", ["b"]),
    ("id:a", ["a"]),
    ("config.lr>=0.01", ["d", "b", "a"]),
    ("config.lr<0.01", ["c"]),
    ("config.lr:0.1", ["a"]),
    ("config.lr>0.01 config.lr<=0.1", ["a"]),
    ("config.opt:adam config.net.depth=4", ["d", "c", "b", "a"]),
    ("config.opt~DA", ["d", "c", "b", "a"]),
    ("config.amp:true", ["d", "c", "b", "a"]),
    ("config.opt!=adam", []),
    ("val_loss<0.5", ["b"]),
    ("val_loss.min<0.6", ["b", "a"]),
    ("val_loss.last>=0.7", ["d", "a"]),
    ("val_loss.max>1", ["d"]),
    ("val_loss.count=3", ["c", "b", "a"]),
    ("val_loss.step>10", ["c", "b", "a"]),
    ("val_loss{rank=0}.best<0.5", ["b"]),
    ('"val_loss{rank=0}.min"<0.5', ["b"]),
    ("test_acc>0.9", ["c"]),
    ("-val_loss<0.5", ["d", "c", "a"]),
    ("started>=1.7e9 ended>1700000550", ["d", "c", "b", "a"]),
    ("ended<2023-11-14T22:24 ended>2023-11-14", ["d", "c", "b", "a"]),
    ("started<2000-01-01", []),
    ("step>=20 step<999", ["b", "a"]),
])
async def test_every_filter_operator(lab, q, expected):
    _, http = lab
    assert await _ids(http, q=q) == expected


async def test_sorts_and_pages_keep_the_query(lab):
    _, http = lab
    assert await _ids(http, sort="val_loss.best") == ["b", "a", "d", "c"], "no best (NaN) sorts last"
    assert await _ids(http, sort="-val_loss.min", q="project:cifar") == ["c", "a", "b"]
    assert await _ids(http, sort="config.lr") == ["c", "b", "a", "d"]
    assert await _ids(http, sort="-config.lr") == ["d", "a", "b", "c"]
    assert await _ids(http, sort="name") == ["a", "b", "c", "d"]
    assert await _ids(http, sort="project,-name") == ["c", "b", "a", "d"]
    page = await http.get("/runs", params={"q": "project:cifar", "sort": "val_loss", "limit": 2})
    assert [r["run_id"] for r in page.json()] == ["b", "a"] and page.headers["x-total-count"] == "3"
    following = page.headers["link"].split(";")[0].strip("<>")
    assert [r["run_id"] for r in (await http.get(following)).json()] == ["c"]


@pytest.mark.parametrize(("params", "position", "reason"), [
    ({"q": "val_loss<x"}, 9, "'x' is not a number"),
    ({"q": "project:cifar status:gone"}, 21, "unknown status 'gone'"),
    ({"q": "name<3"}, 0, "name takes"),
    ({"q": 'name~"open'}, 5, "quote is not closed"),
    ({"q": "val_loss"}, None, None),
    ({"q": "lr{rank=0"}, 0, "'{' is not closed"),
    ({"q": "config.<1"}, 0, "names no key"),
    ({"sort": "name;drop"}, None, None),
    ({"sort": "-val_loss,"}, 10, "missing"),
])
async def test_a_mistake_is_a_400_naming_its_position(lab, params, position, reason):
    _, http = lab
    reply = await http.get("/runs", params=params)
    if position is None:  # not a mistake: a bare word is a name, a sort key any field
        assert reply.status_code == 200
        return
    assert reply.status_code == 400, reply.text
    detail = reply.json()["detail"]
    assert f"position {position}: " in detail and reason in detail, detail


async def test_patch_needs_the_token_and_checks_what_it_sets(lab):
    _, http = lab
    change = {"tags": ["best", "keep", "best"], "notes": "rerun with warmup", "group": "sweep-2"}
    assert (await http.patch("/runs/a", json=change)).status_code == 401
    assert (await http.patch("/runs/a", json=change, headers={"Authorization": "Bearer nope"})).status_code == 401
    auth = {"Authorization": f"Bearer {TOKEN}"}
    reply = await http.patch("/runs/a", json=change, headers=auth)
    assert reply.status_code == 200, reply.text
    assert (reply.json()["tags"], reply.json()["notes"], reply.json()["group"]) == (["best", "keep"],
                                                                                   "rerun with warmup", "sweep-2")
    assert await _ids(http, q="tag:best group:sweep-2") == ["a"]
    assert (await http.patch("/runs/a", json={"notes": ""}, headers=auth)).json()["tags"] == ["best", "keep"]
    assert (await http.patch("/runs/nope", json=change, headers=auth)).status_code == 404
    for bad in ({"tags": ["has blank"]}, {"tags": ["x" * 65]}, {"tags": ["t"] * 33}, {"notes": "n" * 4001},
                {"group": "a b"}, {"colour": "red"}, {"tags": "baseline"}, []):
        reply = await http.patch("/runs/a", json=bad, headers=auth)
        assert reply.status_code == 422, (bad, reply.text)
        assert "invalid change" in reply.json()["detail"]
    # Which answer comes first: the token, then the run, then the body (too large, or not a change).
    assert (await http.patch("/runs/a", json={"colour": "red"})).status_code == 401
    assert (await http.patch("/runs/nope", json={"colour": "red"}, headers=auth)).status_code == 404
    assert (await http.patch("/runs/a", content=b"x" * 70_000, headers=auth)).status_code == 413


async def test_patch_without_a_token_on_a_server_without_one(server_url):
    await _store(server_url, "r", _run("r", lr=0.1, losses=[1.0]))
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        reply = await http.patch("/runs/r", json={"tags": ["x"]})
        assert reply.status_code == 200 and reply.json()["tags"] == ["x"]


async def test_a_page_cut_to_its_first_series_keeps_what_the_run_set_outright_and_what_it_sorts_by(lab, monkeypatch):
    from nissa_server.store import runs_page

    _, http = lab
    monkeypatch.setattr(runs_page, "MAX_METRICS", 2)  # the server is in this process
    run = (await http.get("/runs", params={"q": "id:c", "sort": "val_loss.min"})).json()[0]
    # Its first two by key, what it set outright (run.summary: what it achieved), what the page sorts by; the end
    # of a run that is not Esper's carries nothing of Esper's (no run_finished.fossilized, .rounds …).
    assert sorted(run["metrics"]) == ["lr", "run_finished.duration_s", "test_acc", "val_loss"]


async def test_a_long_config_value_is_stored_and_filtered_by_its_start(tmp_path):
    """An index entry has a size limit (PostgreSQL's btree, about 2.7 kB): a long config string (a prompt, a
    path) is kept whole in the run's config and filtered by its first 256 characters; a key too long to
    filter by is kept in the config only."""
    noise = "".join(random.Random(0).choices(string.ascii_letters + string.digits, k=6000))  # incompressible
    prompt, long_key = "once upon a time " + noise, "k" * 300
    started = RunStarted(name="long", config={"prompt": prompt, long_key: "x", "lr": 0.1})
    events = [make_event(started, run_id="long", seq=1, ts=1.7e9)]
    with running_server(tmp_path) as url:
        await _store(url, "long", events)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            run = (await http.get("/runs/long")).json()
            assert run["config"]["prompt"] == prompt and run["config"][long_key] == "x"
            assert await _ids(http, q='config.prompt~"once upon"') == ["long"]
            assert await _ids(http, q="config.lr>=0.1") == ["long"]
