"""Commands a trainer gives itself (``--profile``, auto-escalation) are recorded from their status events,
quietly: ``GET /commands/{id}`` shows them, and they never count against the run's open-command limit."""

from __future__ import annotations

import logging

import httpx

from leyline import (
    CommandAction,
    CommandStatus,
    CommandStatusChanged,
    EscalateRequest,
    ProfileRequest,
    StopRequest,
    make_event,
    to_builtins,
)
from leyline.commands import is_trainer_command
from tests.support import IngestClient, events_for, running_server

DEBUG = {"action": "debug", "epochs": 2}


def _statuses(run_id: str, command_id: str, action: CommandAction, steps: list[tuple[CommandStatus, str]],
              first_seq: int, request: EscalateRequest | None = None) -> list:
    """The statuses a run reports of a command it gave itself; the first carries its ``request`` (a trainer of an
    earlier version sent none)."""
    return [make_event(CommandStatusChanged(command_id=command_id, action=action, status=status, message=message,
                                            applied_step=None if status is CommandStatus.DELIVERED else 7,
                                            result={"window": "w1"} if status is CommandStatus.COMPLETED else None,
                                            request=request if i == 0 else None),
                       run_id=run_id, seq=first_seq + i, ts=1.7e9 + first_seq + i, step=7)
            for i, (status, message) in enumerate(steps)]


async def test_trainer_commands_are_recorded_without_a_warning(tmp_path, caplog):
    profile = [(CommandStatus.DELIVERED, "--profile"), (CommandStatus.APPLIED, ""), (CommandStatus.COMPLETED, "")]
    auto = [(CommandStatus.DELIVERED, "auto: kl_spike"), (CommandStatus.APPLIED, "")]  # still open at the end
    events = events_for("self-run", 2, started=True)
    asked = ProfileRequest(run_id="self-run", batches=3, reason="--profile")
    events += _statuses("self-run", "local-profile-0a1b2c", CommandAction.PROFILE, profile, 3, asked)
    events += _statuses("self-run", "auto-3d4e5f", CommandAction.DEBUG, auto, 6)  # as an earlier trainer did
    caplog.set_level(logging.INFO, logger="nissa_server")
    with running_server(tmp_path, max_open_commands=1) as url:
        async with IngestClient(url, "self-run") as client:
            await client.send(events)
            await client.wait_ack(len(events))
            record = httpx.get(f"{url}/commands/local-profile-0a1b2c", timeout=10).json()
            assert record["run_id"] == "self-run" and record["action"] == "profile"
            assert record["status"] == "completed" and record["request"] == to_builtins(asked)
            assert [h["status"] for h in record["history"]] == ["delivered", "applied", "completed"]
            assert record["applied_step"] == 7 and record["result"] == {"window": "w1"}
            listed = httpx.get(f"{url}/runs/self-run/commands", timeout=10).json()
            assert {c["command_id"] for c in listed} == {"local-profile-0a1b2c", "auto-3d4e5f"}
            # The trainer's own open window takes no place among the operator's open commands.
            assert httpx.post(f"{url}/escalate", json={"run_id": "self-run", **DEBUG}, timeout=10).status_code == 202
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    with running_server(tmp_path, max_open_commands=1) as url:  # read back at start-up: still not counted
        async with IngestClient(url, "self-run"):
            auto_record = httpx.get(f"{url}/commands/auto-3d4e5f", timeout=10).json()
            assert auto_record["status"] == "applied" and auto_record["request"] is None  # its length never said
            assert auto_record["history"][0]["message"] == "auto: kl_spike"
            assert httpx.post(f"{url}/escalate", json={"run_id": "self-run", **DEBUG}, timeout=10).status_code == 429


async def test_another_runs_command_id_is_not_taken_over(tmp_path):
    mine = _statuses("run-a", "auto-aaaaaa", CommandAction.STOP, [(CommandStatus.DELIVERED, "mine")], 1,
                     StopRequest(run_id="run-a", reason="mine"))
    theirs = _statuses("run-b", "auto-aaaaaa", CommandAction.DEBUG,
                       [(CommandStatus.DELIVERED, "forged"), (CommandStatus.FAILED, "forged")], 1)
    with running_server(tmp_path) as url:
        for run_id, events in (("run-a", mine), ("run-b", theirs)):
            async with IngestClient(url, run_id) as client:
                await client.send(events)
                await client.wait_ack(len(events))
        record = httpx.get(f"{url}/commands/auto-aaaaaa", timeout=10).json()
    assert record["run_id"] == "run-a" and record["status"] == "delivered" and record["request"]["reason"] == "mine"


async def test_server_command_ids_never_look_like_the_trainers(server_url):
    # The server records commands from status events only for the trainer's ids; its own must never match.
    async with IngestClient(server_url, "live-run"):
        answers = [httpx.post(f"{server_url}/escalate", json={"run_id": "live-run", **DEBUG}, timeout=10).json()
                   for _ in range(3)]
    ids = [answer["command_id"] for answer in answers]
    assert len(set(ids)) == 3 and not any(is_trainer_command(command_id) for command_id in ids)
