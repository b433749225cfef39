"""Sweeps: create one, list them, one with its trials and lineage, stop one; the agents' lease."""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import HTTPException, Path, Response

from leyline import to_builtins
from leyline.sweep_view import SweepView, sweep_view
from leyline.sweeps import (
    Exploit,
    Lease,
    LeasedTrial,
    LeaseGranted,
    MetricGoal,
    Parameter,
    SweepCreated,
    SweepInfo,
    SweepSpec,
    Trial,
)
from nissa_server.access import Access, guarded
from nissa_server.deps import NissaDep, decoded
from nissa_server.openapi import REF, Responses, error, ok, ref
from nissa_server.routes.common import json_response

reads = guarded(Access.READ, tags=["sweeps"])
writes = guarded(Access.WRITE, tags=["sweeps"])
# Lax, as /escalate: JSON Schema calls 3.0 an integer; bounds and rules still apply.
SPEC = Annotated[SweepSpec, decoded(msgspec.json.Decoder(SweepSpec, strict=False), "invalid sweep spec")]
LEASE = Annotated[Lease, decoded(msgspec.json.Decoder(Lease, strict=False), "invalid lease request")]
SweepIdPath = Annotated[str, Path(max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$")]
UNAUTHORIZED: Responses = {401: error("Missing or wrong bearer token", "missing or wrong bearer token")}
NOT_FOUND: Responses = {404: error("No such sweep", "unknown sweep 'lr-3f2a1c'")}
TOO_LARGE: Responses = {413: error("Body too large", "body over 65536 bytes")}


def _example_sweep() -> dict:
    spec = SweepSpec(name="lr", method="pbt", metric=MetricGoal(name="val_loss"), command=["python", "train.py"],
                     parameters={"lr": Parameter(min=1e-4, max=0.1, log=True)}, project="cifar", trials=4, parallel=4)
    exploit = Exploit(step=20, source_trial=2, source_run_id="lr-3f2a1c-t2", before={"lr": 0.05}, after={"lr": 0.0024},
                      at=1.7e9, status="applied", exploit_ms=412.0)
    trials = [Trial(trial_id=1, status="running", params={"lr": 0.0024}, run_id="lr-3f2a1c-t1", metric=0.52, best=0.5,
                    step=31, agent="gpu-1-4242", lineage=[exploit]),
              Trial(trial_id=2, status="running", params={"lr": 0.002}, run_id="lr-3f2a1c-t2", metric=0.41, best=0.41,
                    step=33, agent="gpu-1-4242")]
    return to_builtins(SweepInfo(sweep_id="lr-3f2a1c", name="lr", project="cifar", status="running", method="pbt",
                                 metric=spec.metric, spec=spec, created_at=1.7e9, trials=trials, best_trial=2))


SWEEP = _example_sweep()
GRANTED = to_builtins(LeaseGranted(trials=[LeasedTrial(trial_id=3, run_id="lr-3f2a1c-t3", params={"lr": 0.01})],
                                   method="random", command=["python", "train.py"], name="lr", project="cifar"))


def _body(tp: type) -> dict:
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": REF.format(name=tp.__name__)}}}}}


@writes.post("/sweeps", status_code=201, summary="Create a sweep from its spec (the TOML file's content as JSON)",
             response_class=Response, openapi_extra=_body(SweepSpec),
             responses={201: ok(ref(SweepCreated), {"sweep_id": "lr-3f2a1c", "status": "running"}, "Created"),
                        **UNAUTHORIZED, **TOO_LARGE,
                        422: error("Not a sweep spec: the key and the rule", "invalid sweep spec: Expected `int` "
                                   "<= 1000 - at `$.trials`")})
async def create_sweep(n: NissaDep, spec: SPEC) -> Response:
    sweep_id = await n.sweeps.create(spec)
    return json_response(SweepCreated(sweep_id=sweep_id, status="running"), status_code=201)


@reads.get("/sweeps", summary="Every sweep, newest first (200 at most), with its trials",
           response_class=Response,
            responses={200: ok({"type": "array", "items": ref(SweepInfo)}, [SWEEP], "The sweeps"), **UNAUTHORIZED})
async def list_sweeps(n: NissaDep) -> Response:
    return json_response(await n.sweeps.listed())


@reads.get("/sweeps/{sweep_id}", summary="A sweep: status, metric, trials (values, metric, lineage)",
           response_class=Response,
            responses={200: ok(ref(SweepInfo), SWEEP, "The sweep"), **UNAUTHORIZED, **NOT_FOUND})
async def get_sweep(n: NissaDep, sweep_id: SweepIdPath) -> Response:
    found = await n.sweeps.get(sweep_id)
    if found is None:
        raise HTTPException(404, f"unknown sweep {sweep_id!r}")
    return json_response(found)


@reads.get("/sweeps/{sweep_id}/view", summary="A sweep as its page and the console show it: the trials' rows, the "
           "lineage's rows, the exploit marks of each trial's curve", response_class=Response,
           responses={200: ok(ref(SweepView), to_builtins(sweep_view(msgspec.convert(SWEEP, SweepInfo))), "The view"),
                      **UNAUTHORIZED, **NOT_FOUND})
async def view_sweep(n: NissaDep, sweep_id: SweepIdPath) -> Response:
    found = await n.sweeps.get(sweep_id)
    if found is None:
        raise HTTPException(404, f"unknown sweep {sweep_id!r}")
    return json_response(sweep_view(found))


@writes.post("/sweeps/{sweep_id}/stop", summary="Stop a sweep: its queued trials, and its running ones through "
             "their runs' stop command", response_class=Response,
             responses={200: ok(ref(SweepInfo), {**SWEEP, "status": "stopped"}, "The sweep, stopped"), **UNAUTHORIZED,
                        **NOT_FOUND})
async def stop_sweep(n: NissaDep, sweep_id: SweepIdPath) -> Response:
    found = await n.sweeps.stop(sweep_id, "the sweep was stopped")
    if found is None:
        raise HTTPException(404, f"unknown sweep {sweep_id!r}")
    return json_response(found)


@writes.post("/sweeps/{sweep_id}/lease", summary="An agent's turn: renew its trials' leases, report those that "
             "exited, take new trials", response_class=Response,
             openapi_extra=_body(Lease),
             responses={200: ok(ref(LeaseGranted), GRANTED, "What the agent runs now"), **UNAUTHORIZED, **NOT_FOUND,
                        **TOO_LARGE,
                        422: error("Not a lease request", "invalid lease request: Expected `int` <= 64 - at "
                                   "`$.slots`")})
async def lease(n: NissaDep, sweep_id: SweepIdPath, req: LEASE) -> Response:
    granted = await n.sweeps.lease(sweep_id, req)
    if granted is None:
        raise HTTPException(404, f"unknown sweep {sweep_id!r}")
    return json_response(granted)
