"""Progress within a round: a live line on a terminal, a plain line now and then elsewhere, never a flood."""

from __future__ import annotations

import io
import logging

from trainer.cli import main
from trainer.simic.progress import Progress
from trainer.simic.vectorized import RoundResult

CLEAR = "\r\x1b[2K"
TINY = ["--rounds", "1", "--episode-length", "2", "--n-envs", "1", "--train-size", "64", "--val-size", "32",
        "--batch-size", "32", "--policy", "heuristic"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _round(number: int) -> RoundResult:
    return RoundResult(number, [1.0], [0.5], 0, 0, None)


def _long_round(progress: Progress, clock: Clock, epochs: int, seconds_each: float) -> None:
    for epoch in range(1, epochs + 1):
        clock.now += seconds_each
        progress.epoch(1, epoch, [0.25, 0.75])
    progress.round(_round(1))


def test_a_log_gets_an_epoch_line_now_and_then_within_a_long_round():
    out, clock = io.StringIO(), Clock()
    _long_round(Progress(2, stream=out, episode_length=100, plain_every_s=30.0, clock=clock), clock, 100, 1.0)
    lines = out.getvalue().splitlines()
    epochs = [line for line in lines if "epoch" in line]
    assert epochs == [f"  round 1/2  epoch {e}/100  acc 0.500  {e:.1f}s" for e in (30, 60, 90)]
    assert lines[-1].startswith("round 1/2  acc 0.500") and CLEAR not in out.getvalue()


def test_a_short_round_adds_no_epoch_line_to_a_log():
    out, clock = io.StringIO(), Clock()
    _long_round(Progress(2, stream=out, episode_length=10, clock=clock), clock, 10, 0.5)
    assert len(out.getvalue().splitlines()) == 1


def test_a_terminal_gets_one_live_line_redrawn_a_few_times_a_second():
    out, clock = Terminal(), Clock()
    _long_round(Progress(2, stream=out, episode_length=40, live_every_s=0.25, clock=clock), clock, 40, 0.0625)
    text = out.getvalue()
    draws = text.split(CLEAR)[1:]
    assert text.count("\n") == 1 and text.endswith("\n")  # the round's line, over the live one
    # 40 epochs in 2.5 s: epochs 1, 5, …, 37 (every 0.25 s) and the last one, then the round's line.
    assert [d.split()[3] for d in draws[:-1]] == [f"{e}/40" for e in (*range(1, 40, 4), 40)]
    assert draws[-2].startswith("  round 1/2  epoch 40/40") and draws[-1].startswith("round 1/2  acc")


def test_every_zero_writes_nothing():
    out, clock = Terminal(), Clock()
    _long_round(Progress(2, every=0, stream=out, episode_length=50, clock=clock), clock, 50, 10.0)
    assert out.getvalue() == ""


def test_log_every_zero_silences_the_trainer(capsys, tmp_path):
    assert main(["--log-dir", str(tmp_path), *TINY]) == 0
    assert "round 1/1" in capsys.readouterr().err
    assert main(["--log-dir", str(tmp_path), *TINY, "--log-every", "0"]) == 0
    err = capsys.readouterr().err  # what is left: that this run without a server is only logged
    assert "round" not in err and err.count("\n") == 1 and "no --server" in err, err


def test_a_log_record_starts_a_line_of_its_own_after_a_live_line():
    out, clock = Terminal(), Clock()
    handler = logging.StreamHandler(out)
    logging.getLogger().addHandler(handler)
    try:
        progress = Progress(2, stream=out, episode_length=10, clock=clock)
        progress.epoch(1, 1, [0.5])
        logging.getLogger("trainer.test").warning("something happened")
        clock.now += 1.0
        progress.epoch(1, 2, [0.5])
        progress.close()
        logging.getLogger("trainer.test").warning("after the run")
    finally:
        logging.getLogger().removeHandler(handler)
    lines = out.getvalue().split("\n")
    assert lines[0].endswith("epoch 1/10  acc 0.500  0.0s") and lines[1] == "something happened", lines
    assert lines[2].endswith("epoch 2/10  acc 0.500  1.0s") and lines[3] == "after the run", lines
