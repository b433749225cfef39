"""The ``profile`` command through the real command processor: lifecycle, one window at a time, upload."""

from __future__ import annotations

import http.server
import json
import pathlib
import threading
import time

import pytest
import torch

from leyline import (
    Command,
    CommandStatus,
    CommandStatusChanged,
    ProfileCompleted,
    ProfileRequest,
    ProfileStarted,
)
from nissa.control import CommandProcessor
from nissa.telemetry.profile_handler import (
    ArtifactUploader,
    ProfileHandler,
    UploadConfig,
    artifact_url,
    profile_at_start,
)


class _ArtifactSink(http.server.BaseHTTPRequestHandler):
    """A stand-in for the server's artifact endpoint: records each PUT (path, auth, body)."""

    received: list[tuple[str, str | None, bytes]] = []
    status = 201

    def do_PUT(self) -> None:  # noqa: N802 - the stdlib's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, self.headers.get("Authorization"), body))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def sink():
    handler = type("Sink", (_ArtifactSink,), {"received": [], "status": 201})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Run:
    """A real processor with the profile handler plugged in, fed commands like the hub's inbox."""

    def __init__(self, tmp_path: pathlib.Path, uploader: ArtifactUploader | None) -> None:
        self.events: list = []
        self.inbox: list[Command] = []
        self.processor = CommandProcessor(self.events.append, self._drain)
        self.handler = ProfileHandler(log_dir=tmp_path, run_id="run-1", emit=self.events.append, uploader=uploader)
        self.processor.register(ProfileRequest, self.handler)
        self.model = torch.nn.Linear(8, 2)
        self.step = 0

    def _drain(self) -> list[Command]:
        out, self.inbox[:] = list(self.inbox), []
        return out

    def batch(self) -> None:
        self.model(torch.randn(4, 8)).sum().backward()
        self.step += 1
        self.processor.step_boundary(self.step, 1)

    def statuses(self, command_id: str) -> list[CommandStatusChanged]:
        return [e for e in self.events if isinstance(e, CommandStatusChanged) and e.command_id == command_id]

    def until_finished(self, command_id: str, limit_s: float = 60.0) -> CommandStatusChanged:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            self.batch()
            final = [s for s in self.statuses(command_id) if s.status.terminal]
            if final:
                return final[0]
            time.sleep(0.01)
        raise AssertionError(f"command {command_id} did not finish: {self.statuses(command_id)}")


def _profile(cid: str, batches: int) -> Command:
    return Command(command_id=cid, request=ProfileRequest(run_id="run-1", batches=batches))


def test_window_is_applied_recorded_uploaded_and_completed(tmp_path, sink):
    received_by, url = sink
    run = _Run(tmp_path, ArtifactUploader(UploadConfig(server=url, run_id="run-1", token="s3cret")))
    run.batch()
    run.inbox.append(_profile("c1", 2))
    run.batch()  # applied at step 2
    started = [e for e in run.events if isinstance(e, ProfileStarted)]
    assert len(started) == 1 and started[0].command_id == "c1" and started[0].activities
    assert pathlib.Path(started[0].trace_dir).parent == tmp_path / "run-1" / "profiles"
    final = run.until_finished("c1")
    assert final.status is CommandStatus.COMPLETED and final.applied_step == 2
    assert [s.status for s in run.statuses("c1")] == [CommandStatus.APPLIED, CommandStatus.COMPLETED]
    (done,) = [e for e in run.events if isinstance(e, ProfileCompleted)]
    assert done.batches == 2 and done.top_ops and done.command_id == "c1"
    assert done.artifact == final.result["artifact"] and done.artifact.endswith(".pt.trace.json")
    (path, auth, body) = received_by.received[0]
    assert path == f"/runs/run-1/artifacts/{done.artifact}" and auth == "Bearer s3cret"
    assert body == pathlib.Path(done.trace_path).read_bytes() and json.loads(body)["traceEvents"]
    assert not run.handler.busy


def test_second_window_is_rejected_with_a_reason_while_one_is_open(tmp_path):
    run = _Run(tmp_path, uploader=None)
    run.inbox += [_profile("a", 3), _profile("b", 1)]
    run.batch()
    (rejected,) = [s for s in run.statuses("b") if s.status is CommandStatus.REJECTED]
    assert "one window at a time" in rejected.message and "a" in rejected.message
    assert run.until_finished("a").status is CommandStatus.COMPLETED
    run.inbox.append(_profile("c", 1))  # free again once the first completed
    assert run.until_finished("c").status is CommandStatus.COMPLETED
    assert len(list((tmp_path / "run-1" / "profiles").iterdir())) == 2


def test_without_a_server_the_trace_stays_local(tmp_path):
    run = _Run(tmp_path, uploader=None)
    run.inbox.append(_profile("c1", 1))
    final = run.until_finished("c1")
    assert final.result["artifact"] is None and pathlib.Path(final.result["trace_path"]).is_file()


def test_failed_upload_still_completes_with_the_local_trace(tmp_path, sink):
    received_by, url = sink
    received_by.status = 403
    run = _Run(tmp_path, ArtifactUploader(UploadConfig(server=url, run_id="run-1", attempts=1)))
    run.inbox.append(_profile("c1", 1))
    final = run.until_finished("c1")
    assert final.status is CommandStatus.COMPLETED and final.result["artifact"] is None
    assert "upload failed" in final.message and "403" in final.message


def test_run_end_closes_an_open_window(tmp_path):
    run = _Run(tmp_path, uploader=None)
    run.inbox.append(_profile("long", 100))
    for _ in range(4):
        run.batch()
    run.processor.run_end("completed")
    final = [s for s in run.statuses("long") if s.status.terminal][0]
    assert final.status is CommandStatus.COMPLETED and final.result["partial"] is True
    assert final.result["batches"] == 2
    run.inbox.append(_profile("late", 5))
    run.batch()
    run.processor.run_end("completed")  # still in warm-up: nothing recorded, the command fails
    assert [s for s in run.statuses("late") if s.status.terminal][0].status is CommandStatus.FAILED


def test_profile_at_start_goes_through_the_command_path(tmp_path):
    run = _Run(tmp_path, uploader=None)
    cid = profile_at_start(run.processor, "run-1", batches=1)
    assert [s.status for s in run.statuses(cid)] == [CommandStatus.DELIVERED]
    assert run.until_finished(cid).status is CommandStatus.COMPLETED


@pytest.mark.parametrize("server, expected", [
    ("http://127.0.0.1:8765", "http://127.0.0.1:8765/runs/r%3A1/artifacts/a%20b.json"),
    ("ws://127.0.0.1:8765/ws/ingest", "http://127.0.0.1:8765/runs/r%3A1/artifacts/a%20b.json"),
    ("https://nissa.example/base/", "https://nissa.example/base/runs/r%3A1/artifacts/a%20b.json"),
])
def test_artifact_url(server, expected):
    assert artifact_url(server, "r:1", "a b.json") == expected


def test_a_request_records_shapes_and_memory_when_it_asks_and_neither_by_default(tmp_path):
    run = _Run(tmp_path, None)
    run.batch()
    run.inbox.append(_profile("plain", 1))
    plain = run.until_finished("plain")
    asked = Command(command_id="rich", request=ProfileRequest(run_id="run-1", batches=1, record_shapes=True,
                                                              profile_memory=True))
    run.inbox.append(asked)
    rich = run.until_finished("rich")
    assert [(s.result["record_shapes"], s.result["with_stack"], s.result["profile_memory"]) for s in (plain, rich)] \
        == [(False, False, False), (True, False, True)]
    events = {cid: json.loads(pathlib.Path(s.result["trace_path"]).read_text())["traceEvents"]
              for cid, s in (("plain", plain), ("rich", rich))}
    shapes = {cid: any("Input Dims" in e.get("args", {}) for e in evs) for cid, evs in events.items()}
    memory = {cid: any(e.get("name") == "[memory]" for e in evs) for cid, evs in events.items()}
    assert shapes == {"plain": False, "rich": True} and memory == {"plain": False, "rich": True}


@pytest.mark.parametrize(("phases", "phase", "rejected"), [
    ((), None, "this run has no phase 'update' (its phases: none)"),  # the heuristic: no PPO update
    (("validate",), None, "this run has no phase 'update' (its phases: validate)"),
    (("update",), "eval", "this run has no phase 'eval' (its phases: update)"),
    (("update", "validate"), "validate", None),
    (None, "anything", None),  # not declared: the window waits for its phase
])
def test_a_window_over_a_phase_the_run_does_not_have_is_rejected_with_the_reason(tmp_path, phases, phase, rejected):
    run = _Run(tmp_path, uploader=None)
    run.handler.phases = phases
    run.inbox.append(Command(command_id="u", request=ProfileRequest(run_id="run-1", target="update", phase=phase)))
    run.batch()
    final = [s for s in run.statuses("u") if s.status.terminal]
    if rejected is None:
        assert final == [] and run.handler.busy  # armed, waiting for its phase
    else:
        assert [s.status for s in final] == [CommandStatus.REJECTED] and final[0].message.startswith(rejected)
        assert not run.handler.busy and not [e for e in run.events if isinstance(e, ProfileStarted)]
