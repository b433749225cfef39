"""Progress on the terminal (stderr): a line per round, and within a round its epochs as they go.

On a terminal the epochs are one live line, redrawn in place (a few times a second at most) and
replaced by the round's line when the round ends. Anywhere else (a pipe, a log file) an epoch line is
written only once ``plain_every_s`` has passed without any line, so a short round adds nothing to a
log and a long one adds a line now and then, never one per epoch. A live line is ended before anything
else is logged to the terminal (a warning, say), so that the record starts a line of its own.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import TextIO

from trainer.simic.vectorized import RoundResult

_CLEAR = "\r\x1b[2K"


class Progress:
    """Writes to its own stream; the library never prints anywhere else. ``every`` 0 writes nothing."""

    def __init__(self, rounds: int, every: int = 1, stream: TextIO | None = None, *,
                 episode_length: int | None = None, plain_every_s: float = 30.0, live_every_s: float = 0.2,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rounds, self.every, self.episode_length = rounds, every, episode_length
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty()
        self.plain_every_s, self.live_every_s = plain_every_s, live_every_s
        self.clock = clock
        self.start = clock()
        self._last_line = self.start  # the last full line (plain mode's epoch lines wait on it)
        self._last_draw = float("-inf")  # the last live redraw
        self._drawn = False
        self._end_line = _EndLine(self)
        if self.live:
            for handler in logging.getLogger().handlers:
                handler.addFilter(self._end_line)

    def end_line(self) -> None:
        """End a live line drawn so far: what is written next starts a line of its own."""
        if self._drawn:
            self._write("\n")
            self._drawn = False

    def close(self) -> None:
        """The run's progress is over: end its line, stop watching the log handlers."""
        self.end_line()
        for handler in logging.getLogger().handlers:
            handler.removeFilter(self._end_line)

    def epoch(self, round_: int, epoch_in_round: int, accuracies: list[float]) -> None:
        if self.every <= 0:
            return
        now = self.clock()
        if self.live:
            if now - self._last_draw >= self.live_every_s or epoch_in_round == self.episode_length:
                self._write(_CLEAR + self._epoch_text(round_, epoch_in_round, accuracies, now))
                self._last_draw, self._drawn = now, True
        elif now - self._last_line >= self.plain_every_s:
            self._write(self._epoch_text(round_, epoch_in_round, accuracies, now) + "\n")
            self._last_line = now

    def round(self, result: RoundResult) -> None:
        if self.every <= 0 or result.round % self.every and result.round != self.rounds:
            return
        n = max(len(result.final_accuracy), 1)
        acc = sum(result.final_accuracy) / n
        ret = sum(result.episode_return) / n
        line = (f"round {result.round}/{self.rounds}  acc {acc:.3f}  return {ret:+.2f}"
                f"  fossilized {result.fossilized}  pruned {result.pruned}")
        if result.ppo is not None:
            line += f"  kl {result.ppo.approx_kl:.4f}  clip {result.ppo.clip_fraction:.2f}"
        now = self.clock()
        line += f"  {now - self.start:.1f}s"
        self._write((_CLEAR if self._drawn else "") + line + "\n")
        self._last_line, self._drawn = now, False

    def _epoch_text(self, round_: int, epoch: int, accuracies: list[float], now: float) -> str:
        of = f"/{self.episode_length}" if self.episode_length else ""
        mean = sum(accuracies) / max(len(accuracies), 1)
        return f"  round {round_}/{self.rounds}  epoch {epoch}{of}  acc {mean:.3f}  {now - self.start:.1f}s"

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


class _EndLine(logging.Filter):
    """On the root logger's handlers: ends the live line before a record is written (never drops one)."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress

    def filter(self, record: logging.LogRecord) -> bool:
        self.progress.end_line()
        return True
