"""A command carries its typed request from ``POST /escalate`` to the run and back at ``GET /commands/{id}``;
rows an earlier version stored (the request flat, every action's fields side by side, or a trainer's own
command kept with only its action and reason) read as the requests they were; and a trainer of protocol 1
still gets its commands, flat as it reads them."""

from __future__ import annotations

import asyncio
import time

import httpx
import msgspec

from leyline import Command, CommandAction, DebugRequest, ProfileRequest, StopRequest
from leyline.frames_v1 import decode_server_frame, encode_command
from nissa_server.store import queries
from tests.support import IngestClient, events_for
from tests.support.stores import started

# Rows as earlier versions wrote them: the first server kept every field of its flat request, nulls and
# defaults included; later ones the tagged request; a trainer's own command its action, reason and origin.
_OLD_ROWS = {
    "flat": ("debug", b'{"run_id":"rows","action":"debug","epochs":3,"batches":null,"through_update":false,'
                      b'"reason":null}'),
    "flat-profile": ("profile", b'{"run_id":"rows","action":"profile","epochs":null,"batches":7,'
                                b'"through_update":false,"reason":"slow"}'),
    "tagged": ("profile", b'{"action":"profile","run_id":"rows","target":"update","phase":"eval"}'),
    "auto-1": ("debug", b'{"action":"debug","reason":"auto: kl_spike","origin":"trainer"}'),
    "local-stop": ("stop", b'{"action":"stop","reason":"enough","origin":"trainer"}'),
}


async def test_rows_of_earlier_versions_read_as_their_requests_and_go_down_typed(tmp_path):
    store, (run,) = await started(tmp_path, "rows")

    def insert(conn):
        for command_id, (action, request) in _OLD_ROWS.items():
            conn.execute("INSERT INTO commands (command_id, run_key, action, status, created_at, updated_at, request,"
                         " history) VALUES (?,?,?,?,?,?,?,?)",
                         (command_id, run.run_key, action, "queued", time.time(), time.time(), request, b"[]"))

    await store.call(insert)
    records = {r.command_id: r for r in await store.read(queries.list_commands, run.run_key)}
    queued = await store.read(queries.queued_commands, run.run_key)
    await store.close()
    assert records["flat"].request == DebugRequest(run_id="rows", epochs=3)
    assert records["flat-profile"].request == ProfileRequest(run_id="rows", batches=7, reason="slow")
    assert records["tagged"].request == ProfileRequest(run_id="rows", target="update", phase="eval")
    assert records["auto-1"].request is None and records["auto-1"].action is CommandAction.DEBUG  # length unsaid
    assert records["local-stop"].request == StopRequest(run_id="rows", reason="enough")
    # A command the run gave itself never goes back down to it.
    assert {c.command_id: c.request for c in queued} == {k: records[k].request for k in ("flat", "flat-profile",
                                                                                         "tagged")}


async def test_the_record_shows_the_request_as_the_server_took_it(server_url):
    async with IngestClient(server_url, "rec") as client, httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        await client.send(events_for("rec", 2))
        await client.wait_ack(2)
        body = {"run_id": "rec", "action": "debug", "epochs": "4", "reason": "spike"}  # "4": curl's way
        resp = await http.post("/escalate", json=body)
        assert resp.status_code == 202, resp.text
        command = await client.wait_command()
        assert command.request == DebugRequest(run_id="rec", epochs=4, reason="spike")
        record = (await http.get(f"/commands/{command.command_id}")).json()
    assert record["request"] == {"action": "debug", "run_id": "rec", "epochs": 4, "reason": "spike"}
    assert record["action"] == "debug" and record["run_id"] == "rec" and "epochs" not in record
    assert {"status", "applied_step", "result"} <= set(record)


class _OldCommand(msgspec.Struct, kw_only=True):
    """The command as a trainer of protocol 1 decodes it (its own struct, copied here as it was)."""

    command_id: str
    run_id: str
    action: CommandAction
    epochs: int | None = None
    batches: int | None = None
    through_update: bool = False
    target: str | None = None
    reason: str | None = None
    phase: str | None = None
    name: str | None = None
    args: dict[str, object] = {}
    created_at: float = 0.0


class _OldFrame(msgspec.Struct, tag="command", tag_field="type"):
    command: _OldCommand


def test_protocol_one_frames_both_ways():
    command = Command(command_id="c1", request=ProfileRequest(run_id="r", target="update", phase="eval"),
                      created_at=5.0)
    old = msgspec.json.decode(encode_command(command), type=_OldFrame).command
    assert (old.action, old.target, old.phase, old.batches, old.run_id) == ("profile", "update", "eval", None, "r")
    # A frame as an old server wrote it: every field of every action, the others' at their defaults.
    flat = msgspec.json.encode({"type": "command", "command": msgspec.to_builtins(
        _OldCommand(command_id="c2", run_id="r", action=CommandAction.STOP, reason="enough", created_at=6.0))})
    decoded = decode_server_frame(flat)
    assert decoded.command == Command(command_id="c2", request=StopRequest(run_id="r", reason="enough"),
                                      created_at=6.0)


async def test_a_trainer_of_protocol_one_gets_its_commands_flat(server_url):
    async with IngestClient(server_url, "old", protocol=1) as client, \
            httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        assert client.welcome is not None and client.welcome.protocol == 2
        await client.send(events_for("old", 2))
        await client.wait_ack(2)
        resp = await http.post("/escalate", json={"run_id": "old", "action": "debug", "epochs": 2})
        assert resp.status_code == 202, resp.text
        assert client.ws is not None
        while True:  # read as the old trainer does, with its own struct
            raw = await asyncio.wait_for(client.ws.recv(), 30)
            if msgspec.json.decode(raw)["type"] == "command":
                break
    old = msgspec.json.decode(raw, type=_OldFrame).command
    assert (old.command_id, old.run_id, old.action, old.epochs) == (resp.json()["command_id"], "old", "debug", 2)
