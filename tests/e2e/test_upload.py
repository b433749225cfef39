"""``esper-train upload`` as a real process: an offline run's profile traces become artifacts, a server
that is not there is reported at once, and ``--wait`` waits for one that comes up."""

from __future__ import annotations

import http.server
import pathlib
import shutil
import subprocess
import threading

import httpx
import pytest

from .api import command, run_known, wait_for
from .procs import ServerProcess, TrainerProcess, free_port, log_lines, script

pytestmark = pytest.mark.e2e

# Two epochs of four batches: room for a profile window of two batches (one warm-up batch before them).
PROFILED = ["--rounds", "1", "--episode-length", "2", "--n-envs", "1", "--train-size", "256", "--val-size", "64",
            "--batch-size", "64", "--policy", "heuristic", "--profile", "2"]


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory) -> pathlib.Path:
    """The run directory of a finished ``--profile`` run that never had a server (shared, read-only)."""
    log_dir = tmp_path_factory.mktemp("offline") / "runs"
    trainer = TrainerProcess(["--run-name", "offline-profile", *PROFILED], log_dir)
    try:
        trainer.wait_run_id()
        assert trainer.wait(timeout=180) == 0, trainer.stderr
    finally:
        trainer.kill()
    assert "USDT" not in trainer.stderr and "profiler_start" not in trainer.stderr, trainer.stderr
    return trainer.log_path.parent


def _upload(run_dir: pathlib.Path, url: str, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([script("esper-train"), "upload", str(run_dir), "--server", url, *extra],
                          capture_output=True, text=True, timeout=timeout)


def test_upload_sends_the_profile_traces_of_an_offline_run(tmp_path, offline_run):
    run_dir = tmp_path / offline_run.name
    shutil.copytree(offline_run, run_dir)  # moved since it ran: the logged trace paths are stale
    traces = sorted((run_dir / "profiles").rglob("*.pt.trace.json"))
    assert len(traces) == 1
    server = ServerProcess(tmp_path / "nissa.db").start()
    try:
        first = _upload(run_dir, server.url)
        assert first.returncode == 0, first.stdout + first.stderr
        assert "traces: 1 sent, 0 already held" in first.stdout, first.stdout
        run_id = run_dir.name
        listed = httpx.get(f"{server.url}/runs/{run_id}/artifacts", timeout=10).json()
        assert len(listed) == 1 and listed[0]["name"].startswith("profile-w1")
        download = httpx.get(f"{server.url}{listed[0]['url']}", timeout=30)
        assert download.status_code == 200 and download.content == traces[0].read_bytes()

        again = _upload(run_dir, server.url)  # idempotent: nothing new to send
        assert again.returncode == 0 and "0 sent" in again.stdout and "traces: 0 sent, 1 already held" in again.stdout
        assert len(httpx.get(f"{server.url}/runs/{run_id}/artifacts", timeout=10).json()) == 1

        local = next(line for line in log_lines(run_dir / "events.jsonl") if b'"local-profile-' in line)
        command_id = local.split(b'"command_id":"')[1].split(b'"')[0].decode()
        record = command(server.url, command_id)
        assert record["status"] == "completed" and record["request"]["reason"] == "--profile"
    finally:
        server.stop()
    # What the upload means: its trace arrived whole (above) and its command was one the server knew. Not the absence
    # of every warning: under load a sweep saw the uploaded run lost before its end arrived and warned "run in
    # trouble" (fixed at its cause, tests/nissa_server/test_upload_alerts.py); a warning of anything else is no
    # failure of the upload.
    server_log = (tmp_path / "nissa.db.log").read_text()
    assert "unknown command" not in server_log, server_log
    assert f"on run {run_id}" not in server_log, "an alert fired at the uploaded run"


class _OtherService(http.server.BaseHTTPRequestHandler):
    """Something that is not nissa-server: every path is a 404 page."""

    def do_GET(self) -> None:  # noqa: N802 - the handler's API
        self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


def test_upload_without_a_server_fails_at_once_with_one_line(offline_run):
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtherService)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        for url, reason in ((f"http://127.0.0.1:{free_port()}", "connection refused"),
                            (f"http://127.0.0.1:{other.server_address[1]}", "HTTP 404")):
            done = _upload(offline_run, url, timeout=60)
            assert done.returncode == 1 and not done.stdout, done.stdout
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and url in lines[0] and reason in lines[0] and "--wait" in lines[0], done.stderr
    finally:
        other.shutdown()
        other.server_close()


def test_upload_waits_for_a_server_that_comes_up(tmp_path, offline_run):
    port = free_port()
    upload = subprocess.Popen([script("esper-train"), "upload", str(offline_run), "--server",
                               f"http://127.0.0.1:{port}", "--wait", "120"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server = ServerProcess(tmp_path / "nissa.db", port=port)
    try:
        assert upload.stderr is not None
        waiting = upload.stderr.readline()  # said once, then quiet until the server answers
        assert "connection refused" in waiting and "waiting up to 120 s" in waiting, waiting
        server.start()
        out, err = upload.communicate(timeout=120)
        assert upload.returncode == 0, out + err
        assert "complete" in out and not err.strip()
        wait_for(lambda: run_known(server.url, offline_run.name), 10, "the uploaded run")
    finally:
        if upload.poll() is None:
            upload.kill()
        server.stop()
