"""A hub on a server of ingest protocol 1 (its welcome says no protocol): the server writes its commands flat, every
action's fields side by side, and the hub reads them as the typed requests they are."""

from __future__ import annotations

import msgspec
from websockets.sync.server import ServerConnection

from leyline import DebugRequest, StopRequest, decode_frame
from leyline.frames import Hello
from nissa.hub import HubConfig, NissaHub
from tests.support.waiting import wait_for

from .helpers import ack_until_closed, serving

# A command as a server of protocol 1 wrote it: its flat struct, with no field left out.
_FLAT = {"command_id": "c-old", "run_id": "old", "action": "debug", "epochs": 2, "batches": None,
         "through_update": False, "target": None, "reason": "spike", "record_shapes": False, "with_stack": False,
         "profile_memory": False, "phase": None, "name": None, "args": {}, "created_at": 5.0}


def _old_server(conn: ServerConnection, hellos: list[Hello]) -> None:
    hello = decode_frame(conn.recv())
    assert isinstance(hello, Hello)
    hellos.append(hello)
    conn.send(msgspec.json.encode({"type": "welcome", "last_seq": 0}).decode())  # no protocol: 1
    for command in (_FLAT, {**_FLAT, "command_id": "c-stop", "action": "stop", "epochs": None}):
        conn.send(msgspec.json.encode({"type": "command", "command": command}).decode())
    ack_until_closed(conn)


def test_a_hub_reads_the_flat_commands_of_a_server_of_protocol_one(tmp_path):
    hellos: list[Hello] = []
    with serving(lambda conn: _old_server(conn, hellos)) as url:
        hub = NissaHub(HubConfig(run_id="old", log_dir=tmp_path, server=url)).start()
        try:
            got: list = []
            wait_for(lambda: got.extend(hub.poll_commands()) or len(got) >= 2, timeout=30, message="both commands")
        finally:
            hub.close(timeout=10)
    assert hellos[0].protocol == 2
    assert [(c.command_id, c.request, c.created_at) for c in got] == [
        ("c-old", DebugRequest(run_id="old", epochs=2, reason="spike"), 5.0),
        ("c-stop", StopRequest(run_id="old", reason="spike"), 5.0)]
