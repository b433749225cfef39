"""A run's series keys as the server shows them (``leyline.run_keys``): ``val_loss`` in a run of one rank,
``val_loss{rank=N}`` in a run of several, in its summaries, its series listed, read and banded; a query, a sort and
``metrics=`` name rank 0's without a rank."""

from __future__ import annotations

import time

import httpx

from leyline import Metrics, RunStarted, make_event
from tests.support import IngestClient, running_server
from tests.support.waiting import async_wait_for


class _Rank:
    def __init__(self, client: IngestClient) -> None:
        self.client, self.seq = client, 0

    async def send(self, payload, step: int = 0) -> None:
        self.seq += 1
        await self.client.send([make_event(payload, run_id=self.client.run_id, seq=self.seq, ts=time.time(),
                                           rank=self.client.rank, step=step)])
        await self.client.wait_ack(self.seq)


async def test_the_rank_is_in_a_runs_keys_only_when_it_has_several(tmp_path):
    with running_server(tmp_path, series_interval_s=0.05) as url:
        async with IngestClient(url, "one", rank=0) as c, IngestClient(url, "two", rank=0) as c0, \
                IngestClient(url, "two", rank=1) as c1, httpx.AsyncClient(base_url=url, timeout=10) as http:
            one, r0, r1 = _Rank(c), _Rank(c0), _Rank(c1)
            await one.send(RunStarted(name="one", config={}, host="h", pid=1, world_size=1))
            await one.send(Metrics(values={"loss": 0.5}, labels={"split": "val"}))
            await one.send(Metrics(values={"loss": 0.4}), step=1)
            for rank, loss in ((r0, 0.3), (r1, 0.9)):
                await rank.send(RunStarted(name="two", config={}, host="h", pid=2, world_size=2))
                await rank.send(Metrics(values={"loss": loss}))

            async def summarised() -> bool:
                runs = {r["run_id"]: r["metrics"] for r in (await http.get("/runs")).json()}
                return "loss" in runs.get("one", {}) and "loss{rank=1}" in runs.get("two", {})

            await async_wait_for(summarised, timeout=30, message="both runs summarised")
            one_keys = set((await http.get("/runs/one")).json()["metrics"])
            assert {"loss", "loss{split=val}"} <= one_keys and not any("rank" in k for k in one_keys), one_keys
            two_keys = set((await http.get("/runs/two")).json()["metrics"])
            assert {"loss{rank=0}", "loss{rank=1}"} <= two_keys and "loss" not in two_keys, two_keys

            listed = (await http.get("/runs/one/series")).json()
            assert {(s["key"], tuple(s["labels"])) for s in listed if s["name"] == "loss"} == {
                ("loss", ()), ("loss{split=val}", ("split",))}
            series = (await http.get("/runs/one/series/loss", params={"runs": "two"})).json()["series"]
            assert sorted((s["run_id"], s["key"], tuple(s["labels"].items())) for s in series) == [
                ("one", "loss", ()), ("one", "loss{split=val}", (("split", "val"),)),
                ("two", "loss{rank=0}", (("rank", "0"),)), ("two", "loss{rank=1}", (("rank", "1"),))]
            pages, after = [], None
            while len(pages) <= len(listed):  # a page at a time, each after the last key shown
                page = (await http.get("/runs/one/series", params={"limit": 1, **({"after": after} if after else {})}
                                       )).json()
                if not page:
                    break
                pages.append(page[0]["key"])
                after = page[0]["key"]
            assert pages == [s["key"] for s in listed]
            bands = (await http.get("/run-groups/series/loss", params={"runs": "one,two"})).json()["bands"]
            assert [(b["key"], b["labels"]) for b in bands] == [
                ("loss", {}), ("loss{rank=1}", {"rank": "1"}), ("loss{split=val}", {"split": "val"})]

            found = (await http.get("/runs", params={"q": "loss.best<0.45", "sort": "loss.best"})).json()
            assert [r["run_id"] for r in found] == ["two", "one"], "rank 0's of the run of two"
            found = (await http.get("/runs", params={"q": "loss{rank=1}.best>0.5"})).json()
            assert [r["run_id"] for r in found] == ["two"]
            only = (await http.get("/runs", params={"metrics": "loss.best", "sort": "name"})).json()
            assert [(r["run_id"], list(r["metrics"])) for r in only] == [("one", ["loss"]), ("two", ["loss{rank=0}"])]
