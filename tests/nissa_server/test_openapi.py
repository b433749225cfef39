"""``/openapi.json`` says what the server does: every example it documents fits its own schema, every
``POST /escalate`` body the README and the examples show is valid and accepted, and the escalate body's
schema and the server's decoder agree on every combination of the body's fields, both ways (a shape the
server accepts is valid per the schema, a shape valid per the schema is accepted)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import jsonschema_rs
import msgspec
import pytest

from leyline.commands import REQUEST_TYPES
from nissa_server.routes.commands import DECODER
from tests.support import events_for, ingest_events

pytestmark = pytest.mark.single_backend
_ROOT = Path(__file__).resolve().parents[2]
_ABSENT = object()
# Each field of the body: left out, or one value valid for the field alone (its type and bounds).
_VALUES: dict[str, tuple[Any, ...]] = {
    "epochs": (_ABSENT, 3, None),
    "batches": (_ABSENT, 20),
    "through_update": (_ABSENT, True, False),
    "target": (_ABSENT, "update", "batches", None),
    "phase": (_ABSENT, "eval"),
    "name": (_ABSENT, "set_lr"),
    "args": (_ABSENT, {"lr": 0.1}),
    "record_shapes": (_ABSENT, True),
    "profile_memory": (_ABSENT, True, False),
    "reason": (_ABSENT, "why"),
}
_ACTIONS = tuple(REQUEST_TYPES)  # every action of the contract


def _validator(doc: dict[str, Any], schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """``schema`` of the document ``doc``, its ``#/components/...`` references resolved in ``doc``."""
    return jsonschema.Draft202012Validator({"allOf": [schema], "components": doc["components"]})


def _examples(doc: dict[str, Any]):
    """(where, schema, example) of every example in the document: request bodies and replies."""
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            bodies = [("request", operation.get("requestBody", {}))]
            bodies += [(status, reply) for status, reply in operation.get("responses", {}).items()]
            for status, body in bodies:
                for media, content in body.get("content", {}).items():
                    where = f"{method.upper()} {path} {status} {media}"
                    if "example" in content:
                        yield where, content.get("schema", {}), content["example"]
                    for name, example in content.get("examples", {}).items():
                        yield f"{where} ({name})", content.get("schema", {}), example["value"]


def _accepted(body: dict[str, Any]) -> bool:
    try:
        DECODER.decode(msgspec.json.encode(body))
        return True
    except msgspec.ValidationError:
        return False


def _shapes():
    fields = list(_VALUES)
    for action in _ACTIONS:
        for values in itertools.product(*_VALUES.values()):
            body = {"run_id": "r-1", "action": action}
            body.update({f: v for f, v in zip(fields, values, strict=True) if v is not _ABSENT})
            yield body


def test_every_documented_example_fits_its_schema(server_url):
    doc = httpx.get(f"{server_url}/openapi.json", timeout=30).json()
    checked = []
    for where, schema, example in _examples(doc):
        errors = [e.message for e in _validator(doc, schema).iter_errors(example)]
        assert not errors, (where, errors[:3])
        checked.append(where)
    escalate = [w for w in checked if w.startswith("POST /escalate request")]
    assert len(escalate) >= 8 and any("(call)" in w for w in escalate) and any("phase" in w for w in escalate)
    assert any("text/csv" in w for w in checked) and len(checked) > 40


def test_the_escalate_schema_and_the_server_agree_on_every_shape(server_url):
    """Every combination of the body's fields: the server's decoder accepts it exactly when the documented
    schema says it is valid. A sample goes through the real route too (a valid shape for an unknown run is
    a 404; an invalid one a 422)."""
    doc = httpx.get(f"{server_url}/openapi.json", timeout=30).json()
    body = doc["paths"]["/escalate"]["post"]["requestBody"]["content"]["application/json"]
    # The Rust validator schemathesis uses: the Python one would take a minute over these shapes.
    schema = jsonschema_rs.Draft202012Validator({"allOf": [body["schema"]], "components": doc["components"]})
    disagree, counts = [], {True: 0, False: 0}
    for n, shape in enumerate(_shapes()):
        accepted = _accepted(shape)
        counts[accepted] += 1
        if accepted != schema.is_valid(shape):
            disagree.append((shape, accepted))
        if n % 997 == 0 or (accepted and counts[True] % 97 == 1):
            status = httpx.post(f"{server_url}/escalate", json=shape, timeout=30).status_code
            assert status == (404 if accepted else 422), (shape, status)
    assert not disagree, (len(disagree), disagree[:5])
    assert counts[True] > 50 and counts[False] > 1000, counts
    for example in body["examples"].values():
        assert _accepted(example["value"]), example


def _curl_bodies():
    """(where, body) of every ``curl … /escalate … -d '{…}'`` in the README and the examples."""
    for path in [_ROOT / "README.md", *sorted((_ROOT / "examples").glob("*.py"))]:
        text = path.read_text()
        for m in re.finditer(r"-d '(\{[^']*\})'", text):
            before = text[: m.start()]
            if "/escalate" in before[before.rfind("curl"):]:
                body = re.sub(r'"(<run_id>|RUN)"', '"r-1"', m.group(1))
                yield f"{path.name}:{before.count(chr(10)) + 1}", msgspec.json.decode(body)


def test_every_escalate_body_the_docs_show_is_valid_and_accepted(server_url):
    doc = httpx.get(f"{server_url}/openapi.json", timeout=30).json()
    schema = doc["paths"]["/escalate"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    shown = list(_curl_bodies())
    for where, body in shown:
        errors = [e.message for e in _validator(doc, schema).iter_errors(body)]
        assert not errors and _accepted(body), (where, body, errors[:3])
    actions = {body["action"] for _, body in shown}
    assert actions == set(REQUEST_TYPES), actions  # every action shown once at least


def test_the_escalate_schema_is_a_union_tagged_by_action(server_url):
    """Generated from the contract's tagged union: one component per action, chosen by ``action``."""
    schemas = httpx.get(f"{server_url}/openapi.json", timeout=30).json()["components"]["schemas"]
    union = schemas["EscalateRequest"]
    assert union["discriminator"]["propertyName"] == "action"
    mapping = union["discriminator"]["mapping"]
    assert set(mapping) == set(_ACTIONS) and len(union["anyOf"]) == len(_ACTIONS)
    for action, where in mapping.items():
        assert schemas[where.rsplit("/", 1)[1]]["properties"]["action"] == {"enum": [action]}


def test_run_ids_the_schema_and_the_server_refuse_alike(server_url):
    schema = httpx.get(f"{server_url}/openapi.json", timeout=30).json()["components"]["schemas"]["StopRequest"]
    run_id = schema["properties"]["run_id"]
    for value in ("r-1", "a..b", "x-", "-x", "..", "a/b", "x" * 129, ""):
        shape = {"run_id": value, "action": "stop"}
        assert _accepted(shape) == jsonschema.Draft202012Validator(run_id).is_valid(value), value


async def test_csv_replies_and_their_documentation(server_url):
    await ingest_events(server_url, events_for("csv-run", 5, started=True))
    doc = httpx.get(f"{server_url}/openapi.json", timeout=30).json()
    documented = doc["paths"]["/runs/{run_id}/series/{name}"]["get"]["responses"]["200"]["content"]
    reply = httpx.get(f"{server_url}/runs/csv-run/series/heartbeat.uptime_s", params={"format": "csv"}, timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/csv")
    assert "text/csv" in documented and reply.text.splitlines()[0] == documented["text/csv"]["example"].split("\n")[0]
