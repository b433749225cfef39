"""Three nissa-server processes on one PostgreSQL database, a real esper-train streaming to the first
of its server list, a watcher on the second and ``POST /escalate`` at the third; the first is killed
mid-run. The trainer moves on to the next server; nothing is lost or stored twice, and the watcher sees
every event once, in order."""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from websockets.sync.client import connect

from tests.support.databases import new_database, postgres_unavailable

from .api import escalate, run_known, wait_for
from .procs import ServerProcess, TrainerProcess, log_lines

pytestmark = pytest.mark.e2e

# Longer than the test: it goes on until the test stops it after the kill, so that part of it is sent after.
RUN = ["--rounds", "40", "--checkpoint-every", "0", "--episode-length", "8", "--n-envs", "1", "--train-size", "256",
       "--val-size", "128", "--batch-size", "64", "--policy", "heuristic"]


class Watcher:
    """A ``/ws/watch`` client on its own thread: every (rank, seq) and cursor it receives, until the
    run's ``run_finished``."""

    def __init__(self, url: str, run_id: str) -> None:
        self.events: list[tuple[int, int]] = []
        self.cursors: list[int] = []
        self.finished = threading.Event()
        self._url = url.replace("http", "ws") + f"/ws/watch?run_id={run_id}&after_seq=0"
        self._ws = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        assert self._ready.wait(30), "the watcher could not connect"

    def _read(self) -> None:
        with connect(self._url, open_timeout=30, max_size=None) as ws:
            self._ws = ws
            self._ready.set()
            for raw in ws:
                self._take(json.loads(raw))

    def _take(self, frame: dict) -> None:
        self.cursors.append(frame["cursor"])
        for event in frame["events"]:
            self.events.append((event["rank"], event["seq"]))
            if event["kind"] == "run_finished":
                self.finished.set()

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
        self._thread.join(10)


def _stored(url: str, run_id: str) -> list[tuple[int, int]]:
    """Every stored (rank, seq) of the run, paging with the (seq, rank) cursor."""
    out: list[tuple[int, int]] = []
    params: dict[str, int] = {"limit": 1000}
    while True:
        page = httpx.get(f"{url}/runs/{run_id}/events", params=params, timeout=30).json()
        if not page:
            return out
        out += [(e["rank"], e["seq"]) for e in page]
        params = {"limit": 1000, "after_seq": page[-1]["seq"], "after_rank": page[-1]["rank"]}


def test_a_server_killed_mid_run_the_trainer_moves_on_and_nothing_is_lost_or_doubled(tmp_path):
    why = postgres_unavailable()
    if why is not None:
        pytest.skip(why)
    url = new_database()
    shared = ("--artifact-dir", str(tmp_path / "artifacts"), "--lost-after", "30")
    a, b, c = (ServerProcess(tmp_path / f"{name}.db", db_url=url, extra_args=shared).start() for name in "abc")
    trainer = TrainerProcess(["--server", f"{a.url},{b.url},{c.url}", "--run-name", "moving", *RUN],
                             tmp_path / "runs")
    watcher = None
    try:
        run_id = trainer.wait_run_id()
        wait_for(lambda: run_known(b.url, run_id), 60, "the run known to every server")
        watcher = Watcher(b.url, run_id)
        command_id = escalate(c.url, {"run_id": run_id, "action": "debug", "epochs": 1})["command_id"]
        wait_for(lambda: httpx.get(f"{c.url}/commands/{command_id}", timeout=10).json()["status"] != "queued", 60,
                 "the command to reach the trainer through server a")
        assert trainer.proc.poll() is None, "the run ended before the kill: make it longer"
        logged_at_kill = len(log_lines(trainer.log_path))
        a.kill()
        # Stopped through c once a is gone (a run of fixed length could end before the kill on a loaded machine,
        # leaving nothing to send elsewhere): the stop's statuses and run_finished come after the kill.
        stop = escalate(c.url, {"run_id": run_id, "action": "stop"})
        assert trainer.wait(timeout=180) == 0, trainer.stderr
        assert watcher.finished.wait(60), "the watcher never saw run_finished"
        local = len(log_lines(trainer.log_path))
        stored = _stored(c.url, run_id)
        trainer_seqs = [seq for rank, seq in stored if rank == 0]
        assert trainer_seqs == list(range(1, local + 1)), "the trainer's log, whole and once"
        assert local > logged_at_kill, "the run went on after the kill"
        assert sorted(watcher.events) == sorted(stored) and len(set(watcher.events)) == len(watcher.events)
        assert [seq for rank, seq in watcher.events if rank == 0] == trainer_seqs, "each rank in order"
        assert watcher.cursors == sorted(set(watcher.cursors)), "cursors only grow"
        record = httpx.get(f"{b.url}/commands/{command_id}", timeout=10).json()
        assert record["status"] in ("applied", "completed")
        assert httpx.get(f"{b.url}/commands/{stop['command_id']}", timeout=10).json()["status"] == "completed"
        assert httpx.get(f"{b.url}/runs/{run_id}", timeout=10).json()["status"] == "stopped"
    finally:
        if watcher is not None:
            watcher.close()
        trainer.kill()
        for server in (a, b, c):
            server.stop()
