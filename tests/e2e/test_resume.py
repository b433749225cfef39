"""Checkpoints and resume with real processes: a trainer killed mid-round goes on from its last
checkpoint as the same run; ``checkpoint`` and ``stop`` through nissa-server; a run stopped and resumed."""

from __future__ import annotations

import httpx
import pytest

from leyline import EventKind
from leyline.esper import EsperKind

from .api import command, escalate, run_known, summary_of, trainer_events, wait_for
from .procs import ServerProcess, TrainerProcess, log_lines

pytestmark = pytest.mark.e2e

TINY = ["--n-envs", "1", "--episode-length", "3", "--train-size", "128", "--val-size", "64", "--batch-size", "32",
        "--lstm-hidden", "16", "--log-every", "0", "--seed", "5", "--device", "cpu"]


def run_info(url: str, run_id: str) -> dict:
    return httpx.get(f"{url}/runs/{run_id}", timeout=10).json()


def assert_stream_is_the_log(url: str, trainer: TrainerProcess, run_id: str) -> list:
    local = log_lines(trainer.log_path)
    stored = wait_for(lambda: (s := trainer_events(url, run_id)) and len(s) == len(local) and s, 30,
                      "the server to hold the whole log")
    assert [e.seq for e in stored] == list(range(1, len(local) + 1))
    return stored


def test_trainer_killed_mid_round_resumes_as_the_same_run(tmp_path):
    """kill -9 in round 2; the run goes lost, then live again from round 1's checkpoint (resumed without
    --server: it streams to the server it streamed to), and ends with its three rounds: one run on the
    server, its stream contiguous and equal to the local log."""
    server = ServerProcess(tmp_path / "nissa.db", extra_args=("--lost-after", "1")).start()
    runs = tmp_path / "runs"
    first = TrainerProcess(["--server", server.url, "--rounds", "40", *TINY], runs)
    resumed = None
    try:
        run_id = first.wait_run_id()
        checkpoint = runs / run_id / "checkpoints" / "round-000001" / "rank0.json"
        wait_for(checkpoint.exists, 120, "the first checkpoint")
        wait_for(lambda: b'"round":2' in first.log_path.read_bytes(), 60, "round 2 to begin")
        first.kill()
        wait_for(lambda: run_info(server.url, run_id)["status"] == "lost", 30, "the run to be found lost")

        # No --server: a resumed run streams where it streamed before.
        resumed = TrainerProcess(["--resume", str(runs / run_id), "--rounds", "3"], runs)
        assert resumed.wait(timeout=120) == 0, resumed.stderr
        assert resumed.run_id == run_id
        stored = assert_stream_is_the_log(server.url, resumed, run_id)
        assert [r["run_id"] for r in httpx.get(f"{server.url}/runs", timeout=10).json()] == [run_id]
        info = run_info(server.url, run_id)
        assert info["status"] == "finished" and info["finish"]["status"] == "completed"
        summary_of(server.url, run_id, "rounds", 3)  # Esper's results are the run's summaries (one rank: no label)
        back = [e for e in stored if e.kind is EventKind.RUN_RESUMED]
        assert len(back) == 1 and back[0].payload.round >= 1
        after = stored[stored.index(back[0]):]
        assert [e.payload.round for e in after if e.kind is EsperKind.PPO_UPDATE] == \
            list(range(back[0].payload.round + 1, 4))
        assert back[0].step == back[0].payload.checkpoint_step
    finally:
        first.kill()
        if resumed is not None:
            resumed.kill()
        server.stop()


def test_checkpoint_and_stop_commands_then_resume(tmp_path):
    """``checkpoint`` completes with its path, size and step; ``stop`` ends the run ``stopped`` with one;
    resuming makes it live again and it finishes."""
    server = ServerProcess(tmp_path / "nissa.db").start()
    runs = tmp_path / "runs"
    trainer = TrainerProcess(["--server", server.url, "--rounds", "40", "--checkpoint-every", "0", *TINY], runs)
    resumed = None
    try:
        run_id = trainer.wait_run_id()
        wait_for(lambda: run_known(server.url, run_id), 60, "the run to reach the server")
        asked = escalate(server.url, {"run_id": run_id, "action": "checkpoint", "reason": "e2e"})
        done = wait_for(lambda: (c := command(server.url, asked["command_id"]))["status"] == "completed" and c,
                        60, "the checkpoint command to complete")
        result = done["result"]
        assert result["bytes"] > 0 and result["step"] > 0 and result["path"].startswith(str(runs / run_id))
        assert (runs / run_id / "checkpoints" / result["path"].rsplit("/", 1)[1] / "rank0.pt").stat().st_size == \
            result["bytes"]

        stop = escalate(server.url, {"run_id": run_id, "action": "stop"})
        assert trainer.wait(timeout=120) == 0, trainer.stderr
        stopped = wait_for(lambda: (c := command(server.url, stop["command_id"]))["status"] == "completed" and c,
                           30, "the stop command to complete")
        stored = assert_stream_is_the_log(server.url, trainer, run_id)
        applied = [e for e in stored if e.kind is EventKind.COMMAND_STATUS and e.payload.status == "applied"
                   and e.payload.command_id == stop["command_id"]]
        epochs = [e.epoch for e in stored if e.kind is EsperKind.EPOCH_COMPLETED]
        assert len(applied) == 1 and epochs[-1] == applied[0].epoch  # it finished that epoch, no other
        info = run_info(server.url, run_id)
        assert info["status"] == "stopped" and info["finish"]["status"] == "stopped"
        rounds = stopped["result"]["round"]
        assert rounds < 40
        summary_of(server.url, run_id, "rounds", rounds)  # resumed: still one rank

        resumed = TrainerProcess(["--server", server.url, "--resume", str(runs / run_id),
                                  "--rounds", str(rounds + 1)], runs)
        assert resumed.wait(timeout=120) == 0, resumed.stderr
        assert_stream_is_the_log(server.url, resumed, run_id)
        assert run_info(server.url, run_id)["status"] == "finished"
    finally:
        trainer.kill()
        if resumed is not None:
            resumed.kill()
        server.stop()
