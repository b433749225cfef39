"""Delivery under faults, with real processes: server crash and restart, server never there,
a peer that stops reading, and an event storm past the hub's queue."""

from __future__ import annotations

import json
import pathlib
import socket
import subprocess
import sys
import threading

import pytest

from leyline import EventKind
from leyline.esper import EsperKind

from .api import run_known, trainer_events, wait_for
from .procs import ServerProcess, TrainerProcess, free_port, log_lines, script

pytestmark = pytest.mark.e2e

SHORT = ["--rounds", "1", "--episode-length", "2", "--n-envs", "1", "--train-size", "256", "--val-size", "64",
         "--batch-size", "64", "--policy", "heuristic"]
LONGER = ["--rounds", "3", "--episode-length", "8", "--n-envs", "1", "--train-size", "256", "--val-size", "128",
          "--batch-size", "64", "--policy", "heuristic"]


def _assert_exactly_the_log(url: str, run_id: str, log: pathlib.Path) -> int:
    local = log_lines(log)
    seqs = [e.seq for e in trainer_events(url, run_id)]
    assert seqs == list(range(1, len(local) + 1)), f"server holds {len(seqs)} events, the log {len(local)}"
    return len(local)


def test_server_killed_mid_run_and_restarted_loses_nothing(tmp_path):
    server = ServerProcess(tmp_path / "nissa.db").start()
    trainer = TrainerProcess(["--server", server.url, "--run-name", "crash", *LONGER], tmp_path / "runs")
    try:
        run_id = trainer.wait_run_id()
        wait_for(lambda: run_known(server.url, run_id) and len(trainer_events(server.url, run_id)) >= 2,
                 60, "some events stored")
        logged_at_kill = len(log_lines(trainer.log_path))
        server.kill()
        wait_for(lambda: len(log_lines(trainer.log_path)) >= logged_at_kill + 2, 60,
                 "the run to go on logging while the server is down")
        server.start()  # same port, same database
        assert trainer.wait(timeout=120) == 0, trainer.stderr
        n = _assert_exactly_the_log(server.url, run_id, trainer.log_path)
        assert b'"kind":"run_finished"' in log_lines(trainer.log_path)[-1] and n >= logged_at_kill + 2
    finally:
        trainer.kill()
        server.stop()


def test_server_absent_for_the_whole_run_then_upload_completes_it_idempotently(tmp_path):
    port = free_port()
    trainer = TrainerProcess(["--server", f"http://127.0.0.1:{port}", "--token", "s3cret", "--run-name", "offline",
                              *SHORT], tmp_path / "runs")
    try:
        run_id = trainer.wait_run_id()
        assert trainer.wait(timeout=120) == 0, trainer.stderr
    finally:
        trainer.kill()
    assert "esper-train upload" in trainer.stderr  # it says how to deliver the rest
    server = ServerProcess(tmp_path / "nissa.db", port=port, token="s3cret").start()
    run_dir = str(trainer.log_path.parent)

    def upload(token: str) -> subprocess.CompletedProcess:
        return subprocess.run([script("esper-train"), "upload", run_dir, "--server", server.url, "--token", token,
                               "--timeout", "30"], capture_output=True, text=True, timeout=120)

    try:
        refused = upload("wrong")
        assert refused.returncode == 1 and "INCOMPLETE" in refused.stdout and "401" in refused.stdout, refused.stdout
        assert not run_known(server.url, run_id)
        for attempt in (1, 2):
            done = upload("s3cret")
            assert done.returncode == 0, done.stdout + done.stderr
            assert "complete" in done.stdout
            if attempt == 2:
                assert " 0 sent" in done.stdout, done.stdout
            _assert_exactly_the_log(server.url, run_id, trainer.log_path)
    finally:
        server.stop()


class StalledListener:
    """Accepts TCP connections and never reads from them (nor answers)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        for c in self.accepted:
            c.close()
        self.sock.close()


def test_a_server_that_never_reads_does_not_hold_training_or_grow_memory(tmp_path):
    stalled = StalledListener()
    trainer = TrainerProcess(["--server", stalled.url, "--run-name", "stalled", "--hub-queue", "1000", *SHORT],
                             tmp_path / "runs")
    try:
        assert trainer.wait(timeout=120) == 0, trainer.stderr
    finally:
        trainer.kill()
        stalled.close()
    assert stalled.accepted, "the hub should have tried the stalled server"
    lines = log_lines(trainer.log_path)
    assert b'"kind":"run_finished"' in lines[-1]
    assert not any(b'"kind":"events_dropped"' in line for line in lines)
    summary = next(line for line in trainer.lines if line.startswith(f"run {trainer.run_id} "))
    assert "completed" in summary and f"{len(lines)} not sent" in summary


def test_event_storm_keeps_every_critical_event_and_counts_every_drop(tmp_path):
    server = ServerProcess(tmp_path / "nissa.db").start()
    try:
        done = subprocess.run([sys.executable, str(pathlib.Path(__file__).with_name("storm.py")),
                               "--server", server.url,
                               "--log-dir", str(tmp_path / "runs"), "--metrics", "40000", "--queue", "50"],
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        emitted = json.loads(done.stdout.strip().splitlines()[-1])
        stored = trainer_events(server.url, emitted["run_id"])
    finally:
        server.stop()
    assert [e.seq for e in stored] == list(range(1, emitted["logged"] + 1))
    kinds = [e.kind for e in stored]
    critical = [k for k in kinds if k in (EventKind.RUN_STARTED, EsperKind.SEED_GERMINATED, EventKind.RUN_FINISHED)]
    assert len(critical) == emitted["critical"]
    missing = emitted["metrics"] - kinds.count(EsperKind.EPOCH_COMPLETED)
    assert missing > 0, "40,000 events into a 50-event queue should overflow it"
    reported = sum(e.payload.counts.get("epoch_completed", 0) for e in stored if e.kind is EventKind.EVENTS_DROPPED)
    assert reported == missing

