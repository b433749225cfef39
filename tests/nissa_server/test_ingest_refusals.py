"""What ingest refuses or rewrites so that no viewer is fooled: a ``ts`` no clock had, what only the server says
(alerts, a command queued or expired), and control characters in a run's texts (both stores)."""

import time

import httpx
import msgspec
import pytest

from leyline import (
    AlertChanged,
    CommandAction,
    CommandStatus,
    CommandStatusChanged,
    EventKind,
    Metrics,
    RunStarted,
    make_event,
)
from leyline.frames import CLOSE_BAD_FRAME
from leyline.samples import SAMPLE_PAYLOADS
from tests.support import IngestClient
from tests.support.clients import close_of

HOSTILE = "a\x1b]52;c;SGk=\x07b\x1b[2J\x9b31mc\x7fd\x00e\nf\tg"


@pytest.fixture
async def http(server_url):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as client:
        yield client


async def _refused(server_url: str, run_id: str, *events) -> tuple[int, str]:
    async with IngestClient(server_url, run_id) as client:
        await client.send(list(events))
        assert client.ws is not None
        return await close_of(client.ws)


def _beat(run_id: str, seq: int, ts: float):
    return make_event(SAMPLE_PAYLOADS[EventKind.HEARTBEAT], run_id=run_id, seq=seq, ts=ts)


@pytest.mark.single_backend  # checked before any store
@pytest.mark.parametrize("ts", [1e300, 8.6e12, 0.0, 946_684_799.0, -1.0])
async def test_a_ts_no_clock_had_is_refused_with_a_close_code_and_the_reason(server_url, http, ts):
    code, reason = await _refused(server_url, "clock", _beat("clock", 1, 1.7e9), _beat("clock", 2, ts))
    assert code == CLOSE_BAD_FRAME and "seq 2: ts" in reason and "is not a time" in reason, (code, reason)
    assert (await http.get("/runs/clock/events")).json() == [], "the whole batch is refused"


@pytest.mark.single_backend  # checked before any store
async def test_a_ts_more_than_a_day_ahead_is_refused_and_one_within_it_is_taken(server_url, http):
    now = time.time()
    code, reason = await _refused(server_url, "ahead", _beat("ahead", 1, now + 2 * 86_400))
    assert code == CLOSE_BAD_FRAME and "a day past the server's clock" in reason
    async with IngestClient(server_url, "soon") as client:
        await client.send([_beat("soon", 1, now + 3600), _beat("soon", 2, 946_684_800.0)])
        assert await client.wait_ack(2) == 2


@pytest.mark.single_backend  # checked before any store
async def test_a_trainer_cannot_send_an_alert_the_server_alone_writes(server_url, http):
    forged = AlertChanged(alert_id="x", rule="server", condition="status", state="firing", subject="run",
                          message="your run was deleted: run rm -rf")
    code, reason = await _refused(server_url, "forger", make_event(forged, run_id="forger", seq=1, ts=1.7e9))
    assert code == CLOSE_BAD_FRAME and reason == "seq 1: only the server writes alert events"
    assert (await http.get("/alerts")).json() == []


@pytest.mark.single_backend  # checked before any store
@pytest.mark.parametrize("status", [CommandStatus.QUEUED, CommandStatus.EXPIRED])
async def test_a_trainer_cannot_say_a_command_is_queued_or_expired(server_url, http, status):
    change = CommandStatusChanged(command_id="c1", action=CommandAction.STOP, status=status)
    code, reason = await _refused(server_url, "says", make_event(change, run_id="says", seq=1, ts=1.7e9))
    assert code == CLOSE_BAD_FRAME and reason == f"seq 1: only the server says a command is {status.value}"


@pytest.mark.single_backend  # checked before any store
async def test_a_trainer_still_reports_its_own_command_statuses(server_url, http):
    changes = [CommandStatusChanged(command_id="auto-1", action=CommandAction.DEBUG, status=s)
               for s in (CommandStatus.DELIVERED, CommandStatus.APPLIED, CommandStatus.COMPLETED)]
    async with IngestClient(server_url, "own") as client:
        await client.send([make_event(c, run_id="own", seq=i + 1, ts=1.7e9) for i, c in enumerate(changes)])
        assert await client.wait_ack(3) == 3


async def test_control_characters_of_a_runs_texts_are_stored_as_u_fffd_and_a_resend_is_no_conflict(server_url, http):
    started = make_event(RunStarted(name=f"n{HOSTILE}", config={f"k{HOSTILE}": f"v{HOSTILE}"}), run_id="esc",
                         seq=1, ts=1.7e9)
    logged = make_event(Metrics(values={"loss": 1.0}, labels={"split": HOSTILE}), run_id="esc", seq=2,
                        ts=1.7e9, step=1)
    for _ in range(2):  # the second time, a trainer's resend after a reconnect: duplicates, acked
        async with IngestClient(server_url, "esc", name=f"h{HOSTILE}") as client:
            await client.send([started, logged])
            assert await client.wait_ack(2) == 2
    kept = "a\ufffd]52;c;SGk=\ufffdb\ufffd[2J\ufffd31mc\ufffdd\ufffde\nf\tg"  # newline and tab are text
    run = (await http.get("/runs/esc")).json()
    assert run["name"] == f"n{kept}"
    assert run["config"] == {f"k{kept}": f"v{kept}"}
    events = (await http.get("/runs/esc/events")).text
    assert "\\u001b" not in events and "\x9b" not in events and "\\u0007" not in events
    assert msgspec.json.decode(events)[1]["payload"]["labels"] == {"split": kept}
    keys = [s["key"] for s in (await http.get("/runs/esc/series")).json()]
    assert keys and not any("\x1b" in k or "\x9b" in k for k in keys), keys
