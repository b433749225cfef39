"""The console's charts on a busy or briefly unreachable server: a read answered 429 is asked again after its
``Retry-After``, and a run's series names or history that could not be read are read again later, never left out
of the charts for good."""

from __future__ import annotations

import http.server
import threading

import nissa
from leyline.commands import DebugRequest
from tests.support.server import running_server
from tests.tui.live_console import console, until
from tui.client import ApiError, ClientConfig, NissaClient
from tui.screens.charts import ChartScreen


class _Json(http.server.BaseHTTPRequestHandler):
    """A receiver that answers JSON and logs nothing."""

    def reply(self, code: int, body: bytes, **headers: str) -> None:
        self.send_response(code)
        for name, value in {**headers, "Content-Type": "application/json", "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class Busy(_Json):
    """Any ``GET``: 429 (``Retry-After: 0``) the first ``busy`` times, then ``ok`` (``/runs/r/series``'s one
    series)."""

    busy = 2
    asked = 0
    ok = b'[{"key": "loss", "name": "loss", "points": 1}]'

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).asked += 1
        if type(self).asked <= type(self).busy:
            self.reply(429, b'{"detail": "busy"}', **{"Retry-After": "0"})
        else:
            self.reply(200, type(self).ok)


def busy_server() -> http.server.ThreadingHTTPServer:
    """``Busy`` on 127.0.0.1, served on a thread (``shutdown()`` ends it)."""
    Busy.asked = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def test_a_read_answered_429_is_asked_again_after_its_retry_after():
    server = busy_server()
    client = NissaClient(ClientConfig(f"http://127.0.0.1:{server.server_address[1]}"))
    try:
        assert await client.series_names("r") == ["loss"]
        assert Busy.asked == 3
        Busy.asked, Busy.busy = 0, 100  # busy for longer than it asks again: the refusal is shown
        try:
            await client.series_names("r")
            raise AssertionError("a read refused every time")
        except ApiError as err:
            assert err.status == 429 and err.reason == "busy"
    finally:
        await client.aclose()
        server.shutdown()


async def test_series_names_and_history_that_could_not_be_read_are_read_again(tmp_path, monkeypatch):
    failed: dict[str, int] = {}

    def failing_once(real):
        async def call(self, run_id, *args):
            failed[real.__name__] = failed.get(real.__name__, 0) + 1
            if failed[real.__name__] == 1:  # as a read that timed out on a loaded server
                raise ApiError(0, "cannot reach the server: ReadTimeout")
            return await real(self, run_id, *args)
        return call

    monkeypatch.setattr(NissaClient, "series_names", failing_once(NissaClient.series_names))
    monkeypatch.setattr(NissaClient, "series", failing_once(NissaClient.series))
    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="plain", log_dir=tmp_path / "runs", system_metrics=False)
        for i in range(4):
            run.step()
            run.log({"loss": 1.0 / (i + 1)})
        run.finish()
        app = console(url, run_id=run.run_id, charts=True)
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
            await until(pilot, lambda: [len(t.x) for t in screen.panels[0].shown] == [4], "its history, read again")
            assert screen.panels[0].spec.title == "loss"
    assert failed["series_names"] >= 2 and failed["series"] >= 2


class _Dropping(_Json):
    """``POST /escalate``: the first one read and left unanswered (the connection closed), the next queued."""

    keys: list[str | None] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).keys.append(self.headers.get("Idempotency-Key"))
        if len(type(self).keys) == 1:
            self.close_connection = True
            return
        self.reply(202, b'{"command_id": "cmd-1", "status": "queued"}')


async def test_a_command_that_got_no_answer_is_sent_again_with_the_same_idempotency_key():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Dropping)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = NissaClient(ClientConfig(f"http://127.0.0.1:{server.server_address[1]}"))
    try:
        assert await client.escalate(DebugRequest(run_id="r", epochs=1)) == "cmd-1"
    finally:
        await client.aclose()
        server.shutdown()
    assert len(_Dropping.keys) == 2 and _Dropping.keys[0] == _Dropping.keys[1] and _Dropping.keys[0]
