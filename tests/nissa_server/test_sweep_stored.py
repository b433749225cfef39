"""A sweep stored before a rule it breaks was made still reads, on both stores: its control characters shown as
U+FFFD, a project the runs' rule refuses read as none (``GET /sweeps`` and the sweeps' loop read every stored one)."""

from __future__ import annotations

import json
import tomllib

import msgspec

from leyline.sweeps import decode_spec
from nissa_server.store import sweeps_sql
from tests.leyline.test_sweeps import GOOD
from tests.support.stores import started


async def test_a_sweep_stored_before_the_control_character_rules_reads_scrubbed(tmp_path):
    store, _ = await started(tmp_path)
    spec = decode_spec(tomllib.loads(GOOD))
    await store.call(lambda conn: sweeps_sql.insert_sweep(conn, "s1", spec, 1.7e9))
    old = json.loads(msgspec.json.encode(spec))
    old["command"] = ["python", "train.py", "--tag=\x1b[31mred"]  # as an older server took them
    old["parameters"]["act"]["values"] = ["relu", "ge\u202elu"]
    old["project"] = "my project"
    await store.call(lambda conn: conn.execute("UPDATE sweeps SET spec = ? WHERE sweep_id = ?",
                                               (json.dumps(old), "s1")))
    one = await store.read(lambda conn: sweeps_sql.get_sweep(conn, "s1"))
    listed = await store.read(lambda conn: sweeps_sql.list_sweeps(conn, 10))
    assert one is not None and [s.sweep_id for s in listed] == ["s1"]
    assert one.spec.command == ["python", "train.py", "--tag=\ufffd[31mred"]
    assert one.spec.parameters["act"].values == ["relu", "ge\ufffdlu"]
    assert one.spec.project == ""
    assert listed[0].spec == one.spec
    old["project"] = "a" * 150  # longer than a project may now be
    await store.call(lambda conn: conn.execute("UPDATE sweeps SET spec = ? WHERE sweep_id = ?",
                                               (json.dumps(old), "s1")))
    long = await store.read(lambda conn: sweeps_sql.get_sweep(conn, "s1"))
    await store.close()
    assert long is not None and long.spec.project == ""
