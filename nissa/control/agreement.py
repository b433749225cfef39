"""Agreement: how the ranks of one run apply a command at the same step.

Ranks meet at a cheap, bounded exchange at boundaries they all reach at the same step count: the first
step of the run, and the end of every epoch (every rank runs the same number of batches an epoch).
Each brings what it holds (the commands its own connection delivered, and any it gave itself, such as
an auto-escalation) and its training step time since the last exchange; one all-gather on the gloo
control group gives every rank every report. The decision is a pure function of the reports in rank
order (rank 0's commands first, then each other rank's not already among them), so every rank computes
the one rank 0 would, with one collective instead of a gather and a broadcast; every rank then applies
those commands at that step. Between exchanges nothing is exchanged: no collective and no host sync
per step. A rank that died fails the exchange (the run ends, as torchrun ends it); one that reached it
at another step is a bug the exchange refuses to paper over.

The exchanges after the first are pipelined: the reports of an epoch's end travel while the next epoch
trains, and are read (and their commands applied) at the end of that next epoch. A rank that finishes
an epoch first does not wait for the slowest one at every epoch end (that wait, not the exchange, is
what a blocking meeting would cost); the price is one epoch more before a command applies. The first
exchange, at the run's first step, is read at once: what was asked before the run (``--profile``)
applies at its first step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from leyline import Command

if TYPE_CHECKING:
    from ranks import Ranks


class ControlReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one rank brings to an exchange."""

    rank: int
    step: int
    commands: list[Command] = []
    step_time_s: float | None = None
    """Mean wall time of this rank's training steps since the last exchange (None: fewer than two)."""


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(ControlReport).decode


@dataclass(frozen=True)
class ControlRound:
    """What the ranks agreed on at one exchange."""

    step: int
    commands: list[Command]
    """To apply at ``step`` on every rank, in this order."""
    step_times: tuple[float | None, ...]
    """Each rank's step time (seconds), by rank."""
    exchange_s: float
    """Wall time this rank spent in the exchange (waiting for the others included)."""


class DisagreedStep(RuntimeError):
    """Ranks reached one exchange at different steps: they no longer run the same loop."""


class Agreement:
    """The exchange of one rank; see the module docstring."""

    def __init__(self, ranks: Ranks, *, pipelined: bool = True) -> None:
        self.ranks = ranks
        self.pipelined = pipelined
        self.rounds = 0
        self.total_s = 0.0
        """Wall time spent in exchanges so far."""
        self.times: list[float] = []
        """Wall time of each exchange (the last rank to arrive waits for none: its time is the cost)."""
        self._posted: Callable[[], list[bytes]] | None = None

    def exchange(self, step: int, held: list[Command], step_time_s: float | None) -> ControlRound:
        """Bring ``held`` to the ranks at ``step``; returns what to apply at ``step`` on every rank: what
        this exchange agreed (the first, or any when not pipelined), else what the previous one did."""
        start = time.perf_counter()
        mine = self.ranks.gather_async(_encode(ControlReport(rank=self.ranks.rank, step=step, commands=held,
                                                             step_time_s=step_time_s)))
        if self.pipelined and self.rounds > 0:
            pending, self._posted = self._posted, mine
            reports = self._read(pending) if pending is not None else []
        else:
            reports = self._read(mine)
        spent = time.perf_counter() - start
        self.rounds += 1
        self.total_s += spent
        self.times.append(spent)
        return _decide(step, reports, spent)

    def settle(self) -> None:
        """Wait for the exchange in flight now, keeping what it brings (or how it failed) for the next
        ``exchange`` to read. Called before torch's profiler starts or stops: a profiler that starts or
        stops while a collective runs on gloo's own thread can crash the process (seen: SIGSEGV on CPU)."""
        posted = self._posted
        if posted is None:
            return
        try:
            raws = posted()
        except BaseException as err:  # a rank gone: raised where the exchange reads it, as ever
            failed = err

            def again() -> list[bytes]:
                raise failed

            self._posted = again
            return
        self._posted = lambda: raws

    def drain(self) -> list[Command]:
        """Read the exchange still in flight (the run is ending: every rank drains once, at its end) and
        return its commands, which no rank applies."""
        pending, self._posted = self._posted, None
        return _decide(0, self._read(pending), 0.0).commands if pending is not None else []

    @staticmethod
    def _read(posted: Callable[[], list[bytes]]) -> list[ControlReport]:
        reports = [_decode(raw) for raw in posted()]
        if len({r.step for r in reports}) > 1:
            raise DisagreedStep("ranks reached the control exchange at different steps: "
                                + ", ".join(f"rank {r.rank} at {r.step}" for r in reports))
        return reports


def _decide(step: int, reports: list[ControlReport], spent: float) -> ControlRound:
    """The commands of ``reports`` in rank order, each once (the first rank's copy)."""
    agreed: dict[str, Command] = {}
    for report in reports:
        for command in report.commands:
            agreed.setdefault(command.command_id, command)
    return ControlRound(step=step, commands=list(agreed.values()),
                        step_times=tuple(r.step_time_s for r in reports), exchange_s=spent)


class StepTimer:
    """Mean wall time between a rank's step boundaries since it was last taken (training batches only:
    the boundaries of one epoch are all inside its training phase, where no rank waits for another)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._first = self._last = 0.0
        self._count = 0

    def tick(self) -> None:
        now = self._clock()
        if self._count == 0:
            self._first = now
        self._last = now
        self._count += 1

    def take(self) -> float | None:
        mean = (self._last - self._first) / (self._count - 1) if self._count > 1 else None
        self._count = 0
        return mean
