"""A server restarting does not lose the trials that ran on while it was down: it gives each running trial a whole
lease from its start (no agent could renew one meanwhile), and an agent whose server is away asks again within a
third of its trials' lease, however long its backoff has grown."""

from __future__ import annotations

import time
import tomllib

import pytest

from leyline.sweeps import decode_spec
from nissa.sweep.agent import Agent
from nissa_server.store import sweeps_sql as q
from nissa_server.sweeps.decide import decide
from nissa_server.sweeps.service import SweepService
from tests.leyline.test_sweeps import GOOD
from tests.support.stores import started


async def _running_trial(store, sweep_id: str, lease_until: float) -> None:
    now = time.time()
    await store.call(lambda conn: q.insert_sweep(conn, sweep_id, decode_spec(tomllib.loads(GOOD)), now))
    trial = await store.call(lambda conn: q.new_trial(conn, sweep_id, {"lr": 0.01, "layers": 2}, now))
    await store.call(lambda conn: q.update_trial(conn, sweep_id, trial, status="running", agent="a",
                                                 lease_until=lease_until))


async def _statuses(store, sweep_id: str) -> list[str]:
    await store.call(lambda conn: decide(conn, sweep_id))
    return [t.status for t in await store.read(lambda conn: q.trials(conn, sweep_id))]


async def test_a_starting_server_gives_running_trials_a_whole_lease_before_calling_them_lost(tmp_path):
    store, _ = await started(tmp_path)
    try:
        await _running_trial(store, "kept", time.time() - 20)  # expired while no server was up
        await _running_trial(store, "away", time.time() - 20)
        assert await _statuses(store, "away") == ["lost", "queued"]  # without the restart's grace: lost, again
        service = SweepService(store, commands=None, lease_s=30.0)  # type: ignore[arg-type]
        assert await service.resume() == 1  # the lost one is not running: left as it is
        assert await _statuses(store, "kept") == ["running"]
        [row] = await store.read(lambda conn: q.trials(conn, "kept"))
        assert row.lease_until is not None and row.lease_until > time.time() + 25
    finally:
        await store.close()


@pytest.mark.single_backend  # no store
def test_an_agent_with_trials_running_asks_again_within_a_third_of_their_lease():
    agent = Agent(client=None, sweep_id="s", server="http://127.0.0.1:1")  # type: ignore[arg-type]
    assert [agent._retry_s(n) for n in (1, 2, 3, 4, 9)] == [4.0, 8.0, 16.0, 30.0, 30.0]  # nothing running
    agent._lease_s = 6.0
    agent._running[1] = object()  # type: ignore[assignment]
    assert [agent._retry_s(n) for n in (1, 4, 9)] == [2.0, 2.0, 2.0]
