"""The server's alerts, as events of the run they are about (a console shows them as they come)."""

from __future__ import annotations

from typing import ClassVar, Literal

from leyline.enums import EventKind, Kind
from leyline.payloads import Payload

AlertState = Literal["firing", "resolved"]
AlertCondition = Literal["status", "anomaly", "hang", "straggler", "threshold", "nan", "stale"]


class AlertChanged(Payload, kw_only=True, frozen=True):
    """An alert rule fired on the run, or its condition ended (``resolved``); ``rank`` names the rank a
    hang or a straggler is about, ``command_id`` the ``stacks`` command the server asked for it."""

    KIND: ClassVar[Kind] = EventKind.ALERT
    alert_id: str
    rule: str
    condition: AlertCondition
    state: AlertState
    subject: str
    message: str
    rank: int | None = None
    command_id: str | None = None
