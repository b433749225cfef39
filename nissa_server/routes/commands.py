"""``POST /escalate`` and ``GET /commands/{command_id}``."""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import Header, HTTPException, Response

from leyline import CommandRecord, EscalateRequest
from leyline.commands import misplaced
from nissa_server.access import Access, guarded
from nissa_server.commands import CommandError
from nissa_server.deps import NissaDep, StoreDep, decoded
from nissa_server.openapi import EXAMPLES, REF, error, ok, ref
from nissa_server.routes.common import json_response
from nissa_server.schemas import EscalateAccepted
from nissa_server.store import queries

router = guarded(Access.READ, tags=["commands"])
escalations = guarded(Access.WRITE, tags=["commands"])
# Lax: JSON Schema calls 3.0 an integer, and curl users write "3"; bounds and rules still apply.
DECODER = msgspec.json.Decoder(EscalateRequest, strict=False)
EscalateBody = Annotated[EscalateRequest, decoded(DECODER, "invalid escalation", misplaced)]

_ESCALATE_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {
            "schema": {"$ref": REF.format(name="EscalateRequest")},
            "examples": {name.removeprefix("escalate_"): {"value": value} for name, value in EXAMPLES.items()
                         if name.startswith("escalate_")},
        }},
    }
}


@escalations.post(
    "/escalate", status_code=202, summary="Ask a live run for a debug or profile window, a checkpoint, or to stop",
    response_class=Response, openapi_extra=_ESCALATE_BODY,
    responses={
        202: ok(ref(EscalateAccepted), EXAMPLES["accepted"], "Queued (or, for a retried Idempotency-Key, "
                "the command the first request created)"),
        401: error("Missing or wrong bearer token", "missing or wrong bearer token"),
        404: error("No such run", "unknown run 'r-x'"),
        409: error("The run is not live", "run 'r-x' is finished, not live"),
        413: error("Body too large", "body over 65536 bytes"),
        422: error("Invalid request, a call the run did not declare, a phase it does not have, or an "
                   "Idempotency-Key used before with another body",
                   "action 'profile' needs 'batches' (1..500) or 'target': 'update'",
                   undeclared="the run declared no command 'set_lr' (it declared: none)",
                   no_such_phase="this run has no phase 'update' (its phases: none): a profile window of target "
                                 "'update' would never record; profile 'batches' instead",
                   idempotency_key="Idempotency-Key was already used with a different request body"),
        429: error("Too many open commands for this run", "run 'r-x' already has 8 open commands"),
    },
)
async def escalate(
    n: NissaDep, req: EscalateBody,
    idempotency_key: Annotated[str | None, Header(max_length=200, description="Retries with the same key "
                                                  "return the same command")] = None,
) -> Response:
    try:
        command_id, created, status = await n.commands.escalate(req, idempotency_key)
    except CommandError as err:
        raise HTTPException(err.status_code, err.detail) from None
    if created:
        n.metrics.commands_created.inc()
    return json_response(EscalateAccepted(command_id=command_id, status=status), status_code=202)


@router.get("/commands/{command_id}", summary="A command: status, applied step, result, history",
            response_class=Response,
            responses={200: ok(ref(CommandRecord), EXAMPLES["command"]),
                       401: error("Reads need the bearer token", "missing or wrong bearer token"),
                       404: error("No such command", "unknown command 'c-x'")})
async def get_command(store: StoreDep, command_id: str) -> Response:
    record: CommandRecord | None = await store.read(queries.get_command, command_id)
    if record is None:
        raise HTTPException(404, f"unknown command {command_id!r}")
    return json_response(record)


