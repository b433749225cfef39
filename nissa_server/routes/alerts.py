"""``GET /alerts`` (every run's, newest first), ``GET /alerts/rules``, ``GET /alerts/{id}``, ``GET
/runs/{run_id}/alerts``."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import HTTPException, Query, Response

from nissa_server.access import Access, guarded
from nissa_server.deps import NissaDep, SettingsDep, StoreDep, run_or_404
from nissa_server.openapi import EXAMPLES, Responses, error, ok, ref
from nissa_server.routes.common import json_response
from nissa_server.schemas import AlertInfo
from nissa_server.store import alerts_sql
from nissa_server.store.conn import Conn

router = guarded(Access.READ, tags=["alerts"])
UNAUTHORIZED: Responses = {401: error("Reads need the bearer token (server started with --read-auth)",
                           "missing or wrong bearer token")}
_LIST: Responses = {200: ok({"type": "array", "items": ref(AlertInfo)}, EXAMPLES["alerts"]), **UNAUTHORIZED}
Status = Annotated[Literal["firing", "resolved"] | None, Query(description="only alerts in this state")]
Limit = Annotated[int, Query(ge=1, le=1000, description="newest first, at most this many")]


def _listed(run_key: int | None, status: str | None, limit: int):
    def read(conn: Conn) -> list[AlertInfo]:
        return alerts_sql.with_deliveries(conn, alerts_sql.list_alerts(conn, run_key=run_key, status=status,
                                                                       limit=limit))
    return read


@router.get("/alerts", summary="Alerts of every run, newest first, with their deliveries", response_class=Response,
            responses=_LIST)
async def list_alerts(store: StoreDep, status: Status = None, limit: Limit = 100) -> Response:
    return json_response(await store.read(_listed(None, status, limit)))


@router.get("/alerts/rules", summary="The alert rules this server applies (--alerts FILE)", response_class=Response,
            responses={200: ok({"type": "object"}, EXAMPLES["rules"]), **UNAUTHORIZED})
async def rules(settings: SettingsDep) -> Response:
    return json_response(settings.alert_rules.describe())


@router.get("/alerts/{alert_id}", summary="One alert, with its deliveries", response_class=Response,
            responses={200: ok(ref(AlertInfo), EXAMPLES["alert"]),
                                          404: error("No such alert", "unknown alert '9e0d1b'"), **UNAUTHORIZED})
async def get_alert(store: StoreDep, alert_id: str) -> Response:
    def read(conn: Conn) -> list[AlertInfo]:
        row = alerts_sql.get_alert(conn, alert_id)
        return [] if row is None else alerts_sql.with_deliveries(conn, [row])

    found = await store.read(read)
    if not found:
        raise HTTPException(404, f"unknown alert {alert_id!r}")
    return json_response(found[0])


@router.get("/runs/{run_id}/alerts", summary="A run's alerts, newest first", response_class=Response,
            responses={**_LIST, 404: error("No such run", "unknown run 'r-x'")})
async def run_alerts(n: NissaDep, run_id: str, status: Status = None, limit: Limit = 100) -> Response:
    run = await run_or_404(n, run_id)
    return json_response(await n.store.read(_listed(run.run_key, status, limit)))
