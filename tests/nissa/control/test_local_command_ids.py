"""Commands the trainer gives itself carry ids the contract marks as the trainer's, so the server records
them instead of warning about an unknown command."""

from __future__ import annotations

from leyline import CommandStatus, CommandStatusChanged, DebugRequest
from leyline.commands import is_trainer_command
from nissa.control import CommandProcessor
from nissa.telemetry.profile_handler import profile_at_start


def test_local_and_automatic_commands_have_trainer_ids_and_report_their_reason():
    emitted: list = []
    processor = CommandProcessor(emitted.append, list)
    auto = DebugRequest(run_id="run-1", epochs=2, reason="auto: kl_spike")
    ids = [profile_at_start(processor, "run-1", 3), processor.issue(auto)]
    assert all(is_trainer_command(command_id) for command_id in ids)
    delivered = [p for p in emitted if isinstance(p, CommandStatusChanged)]
    assert [(p.command_id, p.status, p.message) for p in delivered] == [
        (ids[0], CommandStatus.DELIVERED, "--profile"), (ids[1], CommandStatus.DELIVERED, "auto: kl_spike")]
