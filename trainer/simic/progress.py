"""Progress on the terminal (stderr): one line per round; on a tty also a live status line per epoch."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from trainer.simic.vectorized import RoundResult


class Progress:
    """Writes to its own stream; the library never prints anywhere else."""

    def __init__(self, rounds: int, every: int = 1, stream: TextIO | None = None) -> None:
        self.rounds, self.every = rounds, every
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty()
        self.start = time.perf_counter()

    def epoch(self, round_: int, epoch_in_round: int, accuracies: list[float]) -> None:
        if not self.live or self.every <= 0:
            return
        mean = sum(accuracies) / max(len(accuracies), 1)
        self.stream.write(f"\r  round {round_}/{self.rounds}  epoch {epoch_in_round}"
                          f"  acc {mean:.3f}  {time.perf_counter() - self.start:6.1f}s ")
        self.stream.flush()

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
        line += f"  {time.perf_counter() - self.start:.1f}s"
        self.stream.write(("\r\x1b[2K" if self.live else "") + line + "\n")
        self.stream.flush()
