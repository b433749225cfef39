"""Which client's own panels a run has: one rule (``leyline.panels.client_panels``) that the server serves with a run
(``RunDetail.panels``) and the console applies to the events it folds."""

from __future__ import annotations

from leyline import KINDS
from leyline.esper.panels import PANEL_KINDS, PANELS
from leyline.panels import CLIENT_PANELS, client_panels
from leyline.runs import RunDetail


def test_any_of_espers_kinds_makes_a_run_espers_and_none_of_the_cores_does():
    assert CLIENT_PANELS == {PANELS: PANEL_KINDS}
    for kind in KINDS:
        assert client_panels({kind.value}) == ([PANELS] if kind in PANEL_KINDS else []), kind
    core = {kind.value for kind in KINDS if kind not in PANEL_KINDS}
    assert core and client_panels(core) == [] and client_panels(set()) == []
    assert RunDetail(run_id="r", name="r", status="live", created_at=0.0, last_seen_at=0.0).panels == []
