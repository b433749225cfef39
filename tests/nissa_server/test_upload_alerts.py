"""A run that arrives by upload (``esper-train upload``, ``nissa.upload``, ``nissa import``) is history, not a run
in trouble: the server creates it not live (``lost`` until its ``run_finished`` arrives, for good if it never
ended), and the built-in status rule fires for a run a trainer streamed live and then lost, never for one an
upload made. Under load an upload's events took long enough for a sweep to see the run ``lost`` and fire
"run in trouble" at it (a WARNING in the server's log while the upload was under way)."""

from __future__ import annotations

import httpx

from leyline import EventKind, make_event
from leyline.samples import SAMPLE_PAYLOADS
from nissa_server.alerts.rules import AlertRules, with_builtin
from tests.support import IngestClient, running_server
from tests.support.clients import wait_status
from tests.support.waiting import async_wait_for


async def _alerted(url: str) -> set[str]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        return {a["run_id"] for a in (await http.get("/alerts")).json()}


async def test_an_uploaded_run_is_not_in_trouble_a_live_one_lost_is(tmp_path):
    started = SAMPLE_PAYLOADS[EventKind.RUN_STARTED]
    with running_server(tmp_path, lost_after_s=0.5, maintenance_interval_s=0.1,
                        alert_rules=with_builtin(AlertRules())) as url:  # as nissa-server starts
        async with IngestClient(url, "offline", upload=True) as upload:  # a run that ended offline, unseen
            await upload.send([make_event(started, run_id="offline", seq=1, ts=1.7e9)])
            await upload.wait_ack(1)
        await wait_status(url, "offline", "lost")
        async with IngestClient(url, "online") as trainer:  # the control: live, then silent
            await trainer.send([make_event(started, run_id="online", seq=1, ts=1.7e9)])
            await trainer.wait_ack(1)
        await wait_status(url, "online", "lost")
        await async_wait_for(lambda: _has(url, "online"), timeout=30, message="the lost live run's alert")
        assert await _alerted(url) == {"online"}, "the sweeps that saw both runs lost fired for the live one only"


async def _has(url: str, run_id: str) -> bool:
    return run_id in await _alerted(url)
