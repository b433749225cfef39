"""The OpenAPI document: leyline's and the server's msgspec types as components, with examples."""

from __future__ import annotations

from typing import Any

import msgspec
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from leyline import (
    ESCALATIONS,
    PAYLOAD_TYPES,
    CommandRecord,
    CommandStatus,
    DebugRequest,
    EscalateRequest,
    ProfileCompleted,
    RunStatus,
    StatusChange,
    TopOp,
    forms,
    to_builtins,
)
from leyline.codec import WireEvent
from leyline.enums import CommandAction
from leyline.esper.panels import EsperPanels, fold
from leyline.groups import BandsReply, ConfigDiff, GroupsReply
from leyline.panels import ProfileWindow, client_panels, profile_window
from leyline.payloads_histogram import DistributionNames, HistogramsReply
from leyline.runs import RunDetail, RunSummary
from leyline.runs_table import RunsTable, table_columns
from leyline.samples import sample_events
from leyline.series import Marker
from leyline.steering import SteerDefinitions
from leyline.summaries import MetricSummary, RunPatch
from leyline.sweep_view import SweepView
from leyline.sweeps import Lease, LeaseGranted, SweepCreated, SweepInfo, SweepSpec
from nissa_server.schemas import (
    AlertDelivery,
    AlertInfo,
    ArtifactInfo,
    DeletedRun,
    ErrorBody,
    EscalateAccepted,
    Health,
)
from nissa_server.series import SeriesInfo, SeriesReply
from nissa_server.store.migrations import SCHEMA_VERSION

REF = "#/components/schemas/{name}"
TYPES = (RunDetail, RunSummary, RunsTable, SeriesInfo, SeriesReply, Marker, DeletedRun, CommandRecord, AlertInfo,
         HistogramsReply, DistributionNames, EscalateAccepted, ArtifactInfo, Health, ErrorBody,
         BandsReply, ConfigDiff, GroupsReply, RunPatch, ProfileWindow, SteerDefinitions, EsperPanels, WireEvent,
         SweepSpec, SweepInfo, SweepView, SweepCreated, Lease, LeaseGranted, *PAYLOAD_TYPES.values())


def _components() -> dict[str, Any]:
    """Component schemas; the envelope's payload is one of the payload types, chosen by ``kind``."""
    _, components = msgspec.json.schema_components(TYPES, ref_template=REF)
    event = components.pop(WireEvent.__name__)
    event["title"] = "Event"
    event["description"] = "The envelope every event travels in; the payload's type is fixed by `kind`."
    event["properties"]["payload"] = {"anyOf": [ref(tp) for tp in PAYLOAD_TYPES.values()]}
    components["Event"] = event
    (escalate,), commands = msgspec.json.schema_components([EscalateRequest], ref_template=REF)
    for tp in ESCALATIONS:  # the forms each request is checked by, as rules of its component
        commands[tp.__name__].update(forms.schema(tp, tp.FORMS))
    components.update(commands)
    components["EscalateRequest"] = {"title": "EscalateRequest", "description": "Body of `POST /escalate`: one "
                                     "form per action, chosen by `action`.", **escalate}
    return components


def ref(tp: type) -> dict[str, str]:
    return {"$ref": REF.format(name=tp.__name__)}


_ALERT = AlertInfo(alert_id="9e0d1b", run_id="r-20250101-abc", run_name="demo", rule="stuck", condition="hang",
                   subject="rank 1", rank=1, step=4210, status="firing",
                   message="rank 1 has not advanced past step 4210 for 121 s while its heartbeats continue",
                   fired_at=1.7e9, seen_at=1.7e9, command_id="4f1c2a",
                   deliveries=[AlertDelivery(destination="ops/0", state="firing", status="sent", attempts=1,
                                             sent_at=1.7e9 + 0.2)])


def _examples() -> dict[str, Any]:
    events: list[dict[str, Any]] = [to_builtins(e) for e in sample_events(run_id="r-20250101-abc")]
    started = next(e for e in events if e["kind"] == "run_started")
    command = CommandRecord(
        command_id="4f1c2a", run_id="r-20250101-abc", action=CommandAction.DEBUG, status=CommandStatus.APPLIED,
        request=DebugRequest(run_id="r-20250101-abc", epochs=3, reason="loss spike"),
        created_at=1.7e9, updated_at=1.7e9 + 2, applied_step=120,
        history=[StatusChange(status=CommandStatus.QUEUED, ts=1.7e9),
                 StatusChange(status=CommandStatus.DELIVERED, ts=1.7e9 + 1, step=118),
                 StatusChange(status=CommandStatus.APPLIED, ts=1.7e9 + 2, step=120)],
    )
    counts = {"epoch_completed": 12, "heartbeat": 30}
    run = RunDetail(run_id="r-20250101-abc", name="demo", status=RunStatus.LIVE, connected=True, created_at=1.7e9,
                  started_at=1.7e9, last_seen_at=1.7e9 + 30, last_step=120, last_epoch=6,
                  last_seq={"-1": 2, "0": 140}, counts=counts,
                  config=started["payload"]["config"], host="trainer-1", device="cpu", stored_bytes=61_440,
                  project="cifar", group="lr-sweep", tags=["baseline"], notes="first try", panels=client_panels(counts),
                  metrics={"epoch_completed.accuracy{env=0}": MetricSummary(
                      last=0.55, min=0.12, max=0.58, best=0.58, count=12, step=120)})
    summary = RunSummary(
        run_id="r-20250101-abc", name="demo", status=RunStatus.FINISHED, created_at=1.7e9, started_at=1.7e9,
        ended_at=1.7e9 + 30, last_seen_at=1.7e9 + 30, duration_s=30.0, last_step=120, last_epoch=6,
        last_seq={"0": 140}, counts={"epoch_completed": 12}, stored_bytes=61_440, host="trainer-1", device="cpu",
        config=started["payload"]["config"], project="cifar", group="lr-sweep", tags=["baseline"],
        notes="first try", metrics={
            "final_accuracy": MetricSummary(last=0.61, min=0.61, max=0.61, best=0.61, count=1, step=960),
            "val_loss": MetricSummary(last=0.41, min=0.38, max=2.3, best=0.38, count=300, step=299)})
    return {
        "events": events,
        "run": to_builtins(run),
        "runs": [to_builtins(run)],
        "run_summaries": [to_builtins(summary)],
        "runs_table": to_builtins(RunsTable(runs=[summary], total=1, columns=table_columns([summary]))),
        "command": to_builtins(command),
        "commands": [to_builtins(command)],
        "accepted": {"command_id": "4f1c2a", "status": "queued"},
        "deleted": {"run_id": "r-20250101-abc", "events": 142, "commands": 1, "artifacts": 1, "stored_bytes": 61_440},
        "artifact": {"name": "trace.json", "size": 183211, "sha256": "9f86d0…", "created_at": 1.7e9,
                     "url": "/runs/r-20250101-abc/artifacts/trace.json"},
        "health": {"status": "ok", "version": "0.1.0", "schema_version": SCHEMA_VERSION, "runs": 1,
                   "watchers": 0},
        "escalate_debug": {"run_id": "r-20250101-abc", "action": "debug", "epochs": 3, "reason": "loss spike"},
        "escalate_profile": {"run_id": "r-20250101-abc", "action": "profile", "batches": 20},
        "escalate_profile_update": {"run_id": "r-20250101-abc", "action": "profile", "target": "update"},
        "escalate_profile_phase": {"run_id": "r-20250101-abc", "action": "profile", "target": "update",
                                   "phase": "eval"},
        "escalate_call": {"run_id": "r-20250101-abc", "action": "call", "name": "set_lr", "args": {"lr": 0.0003},
                          "reason": "plateau"},
        "escalate_checkpoint": {"run_id": "r-20250101-abc", "action": "checkpoint"},
        "escalate_stop": {"run_id": "r-20250101-abc", "action": "stop", "reason": "enough"},
        "escalate_stacks": {"run_id": "r-20250101-abc", "action": "stacks", "reason": "looks stuck"},
        "profiles": [to_builtins(profile_window(ProfileCompleted(
            window="w1", batches=5, trace_path="runs/r-20250101-abc/profiles/w1/trainer.pt.trace.json", wall_s=0.42,
            top_ops=[TopOp(name="aten::addmm", calls=10, cpu_time_us=1830.0, self_cpu_time_us=1200.0)],
            artifact="profile-w1-rank0.pt.trace.json", command_id="4f1c2a"), 0))],
        "esper": to_builtins(fold(sample_events(run_id="r-20250101-abc"), level="NORMAL")),
        "alert": to_builtins(_ALERT),
        "alerts": [to_builtins(_ALERT)],
        "rules": {"source": "alerts.toml", "rules": [{"name": "stuck", "when": "hang", "runs": "*", "notify": [],
                                                      "after_s": 120.0, "stacks": True}],
                  "destinations": [{"name": "ops", "urls": 1, "max_per_minute": 20}]},
    }


EXAMPLES = _examples()


Responses = dict[int | str, dict[str, Any]]
"""A route's documented replies by status, as FastAPI's ``responses=`` takes them."""


def json_content(schema: dict[str, Any], example: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema, "example": example}}


def ok(schema: dict[str, Any], example: Any, description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": json_content(schema, example)}


def error(description: str, detail: str, **more: str) -> dict[str, Any]:
    """An error reply: its ``detail``, and (``more``, by name) other details the same status may carry."""
    if not more:
        return {"description": description, "content": json_content(ref(ErrorBody), {"detail": detail})}
    examples = {name: {"value": {"detail": text}} for name, text in {"usual": detail, **more}.items()}
    return {"description": description, "content": {"application/json": {"schema": ref(ErrorBody),
                                                                          "examples": examples}}}


def _document_csv(doc: dict[str, Any]) -> None:
    """An operation with ``format=csv`` answers ``text/csv`` too: said beside its JSON reply."""
    for operations in doc.get("paths", {}).values():
        for operation in operations.values():
            formats = [p for p in operation.get("parameters", []) if p.get("name") == "format" and p["in"] == "query"]
            if not formats or "csv" not in str(formats[0].get("schema", {})):
                continue
            ok = operation.get("responses", {}).get("200", {})
            ok.setdefault("content", {})["text/csv"] = {
                "schema": {"type": "string"},
                "example": "run_id,key,x,y\nr-20250101-abc,loss,1.0,0.93\nr-20250101-abc,loss,2.0,0.87\n"}


def _use_error_body_for_422(doc: dict[str, Any]) -> None:
    """Our 422s carry one readable ``detail`` line (see ``app``), not FastAPI's list of errors."""
    for operations in doc.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            if "422" in responses and "HTTPValidationError" in str(responses["422"]):
                responses["422"] = error("Invalid parameter", "query.limit: Input should be less than or "
                                         "equal to 10000")
    schemas = doc.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)


def _refuse_nul(doc: dict[str, Any]) -> None:
    """Any request is refused before its route if its path or query holds a NUL character (``nul_guard``):
    said of each operation, and of each of its text parameters."""
    for operations in doc.get("paths", {}).values():
        for operation in operations.values():
            for param in operation.get("parameters", []):
                schema = param.get("schema", {})
                texts = [schema, *schema.get("anyOf", [])]
                if any(s.get("type") == "string" for s in texts):
                    schema["not"] = {"pattern": "\u0000"}
            operation.setdefault("responses", {}).setdefault("400", error(
                "A NUL character (%00) in the path or query", "the request's path holds a NUL character (%00)"))


def _restore_examples(doc: dict[str, Any], routes: list[BaseRoute]) -> None:
    """Put back the examples as the routes declare them: FastAPI drops every null from the document, the
    nulls of examples included (a ``Marker``'s ``"env": null`` would be missing from its example)."""
    for route in routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        declared = {str(status): reply for status, reply in route.responses.items()}
        body = (route.openapi_extra or {}).get("requestBody")
        for method in route.methods or ():
            operation = doc["paths"][route.path_format][method.lower()]
            pairs = [(operation["responses"].get(status, {}), reply) for status, reply in declared.items()]
            pairs.append((operation.get("requestBody", {}), body or {}))
            for documented, reply in pairs:
                for media, content in reply.get("content", {}).items():
                    for key in ("example", "examples"):
                        if key in content and media in documented.get("content", {}):
                            documented["content"][media][key] = content[key]


def install(app: FastAPI, routes: list[BaseRoute]) -> None:
    """Replace the generated document with one that also carries our msgspec component schemas; ``routes``
    are the app's routes, those of its routers listed one by one."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, description=app.description,
                              routes=app.routes)
            _restore_examples(doc, routes)
            _use_error_body_for_422(doc)
            _refuse_nul(doc)
            _document_csv(doc)
            doc.setdefault("components", {}).setdefault("schemas", {}).update(_components())
            if app.state.nissa.settings.token:
                doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            app.openapi_schema = doc
        return app.openapi_schema

    # FastAPI's documented way to extend its schema ("Extending OpenAPI"), though its class declares a method.
    app.openapi = openapi  # type: ignore[method-assign]
