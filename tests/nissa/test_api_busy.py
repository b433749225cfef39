"""``nissa.Api`` on a busy server: a read answered 429 is asked again after its ``Retry-After`` (``leyline.busy``),
and shown as refused only once it has been asked ``BUSY_RETRIES`` times more."""

from __future__ import annotations

import pytest

import nissa
from leyline.busy import BUSY_RETRIES
from tests.tui.test_chart_retries import Busy, busy_server


def test_a_read_answered_429_is_asked_again_then_answered(monkeypatch):
    monkeypatch.setattr(Busy, "ok", b"[]")
    monkeypatch.setattr(Busy, "busy", 2)
    server = busy_server()
    try:
        with nissa.Api(f"http://127.0.0.1:{server.server_address[1]}") as api:
            assert api.runs() == []
        assert Busy.asked == 3
        monkeypatch.setattr(Busy, "busy", 100)
        Busy.asked = 0
        with nissa.Api(f"http://127.0.0.1:{server.server_address[1]}") as api, pytest.raises(nissa.ApiError,
                                                                                               match="429 busy"):
            api.runs()
        assert Busy.asked == BUSY_RETRIES + 1
    finally:
        server.shutdown()
