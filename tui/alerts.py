"""The server's alerts on a run as the console follows them, folded from its ``alert`` events: which fire
now (the banner), every one so far (the list), and which ranks a hang alert names (the ranks panel)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from leyline import AlertChanged, Event

MAX_ALERTS = 200


@dataclass
class AlertView:
    alert_id: str
    rule: str
    condition: str
    subject: str
    message: str
    state: str
    fired_ts: float
    rank: int | None = None
    command_id: str | None = None
    resolved_ts: float | None = None
    resolution: str = ""


class AlertTracker:
    """Every alert of one run, oldest first."""

    def __init__(self) -> None:
        self.alerts: OrderedDict[str, AlertView] = OrderedDict()

    def apply(self, event: Event) -> None:
        p = event.payload
        if not isinstance(p, AlertChanged):
            return
        view = self.alerts.get(p.alert_id)
        if p.state == "firing" or view is None:
            view = self.alerts[p.alert_id] = AlertView(p.alert_id, p.rule, p.condition, p.subject, p.message,
                                                       "firing", event.ts, p.rank, p.command_id)
            while len(self.alerts) > MAX_ALERTS:
                self.alerts.popitem(last=False)
        if p.state == "resolved":
            view.state, view.resolved_ts, view.resolution = "resolved", event.ts, p.message

    @property
    def firing(self) -> list[AlertView]:
        return [a for a in self.alerts.values() if a.state == "firing"]

    def hung_ranks(self) -> frozenset[int]:
        return frozenset(a.rank for a in self.firing if a.condition == "hang" and a.rank is not None)

    def banner(self) -> str:
        """One line for the top of the run view; empty when nothing fires."""
        firing = self.firing
        if not firing:
            return ""
        latest = firing[-1]
        more = f" (+{len(firing) - 1} more)" if len(firing) > 1 else ""
        return f"ALERT {latest.rule}: {latest.message}{more}  [a: alerts]"
