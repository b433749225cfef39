"""Text is scrubbed once, at every door (``leyline.text.scrub``): what ``PATCH /runs/{id}`` sets, what ingest
stores and what the alert rules read keep no control character (a NUL, an escape sequence, a bidi override),
on both stores; a field whose pattern refuses one is a 422 naming it."""

from __future__ import annotations

import json

import httpx
import msgspec
import pytest

from leyline import Metrics, RunStarted, encode, make_event
from leyline.calls import ArgSpec, CommandSpec
from leyline.codec import decode_frame_wire
from leyline.frames import EventBatch
from leyline.series import format_key
from nissa_server.alerts.rules import parse_rules
from tests.support import IngestClient, running_server

HOSTILE = "a\x00b\x1b]0;pwned\x07c\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202eexe.txt\u2066d\x9b2J\tok\n"
SCRUBBED = "a\ufffdb\ufffd]0;pwned\ufffdc\ufffd]52;c;cHduZWQ=\ufffd\ufffd[2J\ufffdexe.txt\ufffdd\ufffd2J\tok\n"


async def _started(url: str, run_id: str, notes: str = "") -> None:
    events = [make_event(RunStarted(name=f"r{HOSTILE}", config={}, notes=notes), run_id=run_id, seq=1, ts=1.7e9)]
    async with IngestClient(url, run_id) as client:
        await client.send(events)
        await client.wait_ack(1)


async def test_ingest_scrubs_control_characters_a_client_wrote_as_json_escapes(tmp_path):
    # Python's json.dumps writes every one as ``\\uXXXX``: DEL, C1 and the bidi ones were stored as sent, and
    # an escaped backslash before ``u202e`` is text that stays.
    text, scrubbed = f"{HOSTILE}\x7f\\u202e", f"{SCRUBBED}\ufffd\\u202e"
    label, label_scrubbed = "e\x00\x1b\x07\u202e\x9b\x7f\u2066\\u202e", "e" + "\ufffd" * 7 + "\\u202e"
    started = RunStarted(name=f"r{text}", config={f"k{text}": f"v{text}"}, notes=text)
    logged = Metrics(values={"loss": 1.0}, labels={"env": label})
    events = [make_event(p, run_id="r-esc", seq=i, ts=1.7e9, step=i) for i, p in enumerate((started, logged), 1)]
    frame = json.dumps(json.loads(encode(EventBatch(events=events))))
    assert "\\\\u202e" in frame and "\\u202e" in frame and "\u202e" not in frame
    with running_server(tmp_path) as url:
        async with IngestClient(url, "r-esc") as client:
            assert client.ws is not None
            await client.ws.send(frame)
            await client.wait_ack(2)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            run = (await http.get("/runs/r-esc")).json()
            keys = [s["key"] for s in (await http.get("/runs/r-esc/series")).json()]
    assert (run["name"], run["notes"], run["config"]) == (f"r{scrubbed}", scrubbed, {f"k{scrubbed}": f"v{scrubbed}"})
    assert format_key("loss", {"env": label_scrubbed}) in keys, keys


@pytest.mark.single_backend  # no store
@pytest.mark.parametrize("key", ["e\\u202e", "e\\u009B", "e\\u007f", "e\\u0000"])
def test_a_label_key_with_an_escaped_control_character_is_refused_as_a_raw_one_is(key):
    logged = make_event(Metrics(values={"loss": 1.0}, labels={"env": "x"}), run_id="r", seq=1, ts=1.7e9)
    frame = json.dumps(json.loads(encode(EventBatch(events=[logged])))).replace('"env"', f'"{key}"')
    with pytest.raises(msgspec.ValidationError, match="labels"):
        decode_frame_wire(frame)


async def test_patch_stores_notes_as_ingest_does_and_refuses_control_characters_elsewhere(tmp_path):
    # On PostgreSQL a NUL in the notes was a 500; on SQLite the escape sequences were stored as sent.
    with running_server(tmp_path) as url:
        await _started(url, "r-1", notes=HOSTILE)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            run = (await http.get("/runs/r-1")).json()
            assert (run["notes"], run["name"]) == (SCRUBBED, f"r{SCRUBBED}")  # ingest's rule, the reference
            reply = await http.patch("/runs/r-1", json={"notes": HOSTILE})
            assert reply.status_code == 200, reply.text
            assert reply.json()["notes"] == SCRUBBED
            assert (await http.get("/runs/r-1")).json()["notes"] == SCRUBBED
            listed = {r["run_id"]: r for r in (await http.get("/runs")).json()}
            assert listed["r-1"]["notes"] == SCRUBBED
            for field, value in (("group", "g\x00"), ("project", "p\x1b[2J"), ("tags", ["t\u202e"])):
                reply = await http.patch("/runs/r-1", json={field: value})
                assert reply.status_code == 422, reply.text
                assert f"$.{field}" in reply.json()["detail"], reply.text
            # msgspec said "Input data was truncated" of a body of a lone surrogate: no character, so no text
            reply = await http.patch("/runs/r-1", content=b'{"notes":"a\\ud800b"}')
            assert reply.status_code == 422, reply.text
            assert "`\\ud800` (byte 11) is a lone UTF-16 surrogate" in reply.json()["detail"], reply.text


@pytest.mark.single_backend  # no store
def test_alert_rules_are_scrubbed_as_they_are_read():
    rules = parse_rules({"destinations": {f"ops{HOSTILE}": {"urls": ["json://127.0.0.1:9/hook"]}},
                         "rules": [{"name": f"stuck{HOSTILE}", "when": "hang", "runs": f"prod-{HOSTILE}*",
                                    "notify": [f"ops{HOSTILE}"]},
                                   {"name": "nan", "when": "nan", "series": f"loss{HOSTILE.strip()}"}]})
    stuck, nan = rules.rules
    assert (stuck.name, stuck.runs, stuck.notify) == (f"stuck{SCRUBBED}", f"prod-{SCRUBBED}*", (f"ops{SCRUBBED}",))
    assert list(rules.destinations) == [f"ops{SCRUBBED}"] and rules.targets(stuck)[0].name == f"ops{SCRUBBED}"
    assert nan.series == f"loss{SCRUBBED.strip()}"
    assert stuck.matches("x", f"prod-{SCRUBBED}-7")  # a glob matches the names as they are stored


async def test_an_escalation_reason_and_a_calls_text_are_stored_as_ingest_stores_a_runs_texts(tmp_path):
    # Shown with the command and in the run's stream; they were kept as sent (a NUL on PostgreSQL too).
    declared = [CommandSpec(name="note", help="h", args=[ArgSpec(name="text", type="str", help="h")])]
    started = RunStarted(name="r", config={}, commands=declared)
    with running_server(tmp_path) as url:
        async with IngestClient(url, "r-live") as trainer:  # live: it takes commands
            await trainer.send([make_event(started, run_id="r-live", seq=1, ts=1.7e9)])
            await trainer.wait_ack(1)
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                records = []
                for body in ({"action": "debug", "epochs": 1, "reason": HOSTILE},
                             {"action": "call", "name": "note", "args": {"text": HOSTILE}}):
                    reply = await http.post("/escalate", json={"run_id": "r-live", **body})
                    assert reply.status_code == 202, reply.text
                    records.append((await http.get(f"/commands/{reply.json()['command_id']}")).json())
    assert records[0]["request"]["reason"] == SCRUBBED
    assert records[1]["request"]["args"] == {"text": SCRUBBED}


SWEEP = {"name": "lr", "method": "random", "metric": {"name": "val_loss"}, "command": ["echo", "a"],
         "parameters": {"act": {"values": ["relu", "gelu"]}}}


async def test_a_sweep_with_a_control_character_is_refused_naming_the_field(tmp_path):
    # Its texts were stored as sent (a NUL: a 500 on PostgreSQL); its project is its runs', which PATCH refuses so.
    hostile = [({"project": f"p{HOSTILE}"}, "$.project"), ({"command": ["echo", "a\x1b\u202e\x9b"]}, "$.command[1]"),
               ({"command": ["echo\x00"]}, "$.command[0]"),
               ({"parameters": {"act": {"values": ["relu", "g\x7f"]}}}, "$.parameters[...].values[1]")]
    with running_server(tmp_path) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            for change, field in hostile:
                reply = await http.post("/sweeps", json={**SWEEP, **change})
                assert reply.status_code == 422, reply.text
                detail = reply.json()["detail"]
                assert f"at `{field}`" in detail, detail
                assert "control character" in detail or field == "$.project", detail  # a project's pattern says it
            assert (await http.get("/sweeps")).json() == []
