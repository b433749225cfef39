"""esper-train samples the machine by default (``system`` events after ``run_started``), not with
``--no-system-metrics``; a bad interval is one line naming its flag."""

from __future__ import annotations

import pytest

from leyline import EventKind, decode_event
from tests.trainer.test_cli_errors import TINY, _one_line_error
from trainer.cli import main


def _kinds(log_dir) -> list[EventKind]:
    (log,) = log_dir.glob("*/events.jsonl")
    return [decode_event(line).kind for line in log.read_bytes().splitlines()]


@pytest.mark.parametrize(("flags", "sampled"), [(["--system-metrics-interval", "0.05"], True),
                                                (["--no-system-metrics"], False)])
def test_esper_train_samples_the_machine_unless_told_not_to(tmp_path, flags, sampled):
    assert main(["--log-dir", str(tmp_path), "--run-id", "sys", *flags, *TINY]) == 0
    kinds = _kinds(tmp_path)
    assert kinds[0] is EventKind.RUN_STARTED and kinds[-1] is EventKind.RUN_FINISHED
    assert (EventKind.SYSTEM in kinds) is sampled


def test_a_bad_interval_names_its_flag(capsys, tmp_path):
    err = _one_line_error(capsys, ["--log-dir", str(tmp_path), "--system-metrics-interval", "0", *TINY])
    assert "--system-metrics-interval: system metrics interval must be in" in err
