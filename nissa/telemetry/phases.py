"""Phase timing: wall and CPU time per phase of the loop, reported per epoch, always on.

``with timer.phase("train"): ...`` adds to that phase's totals; ``timer.report(round_,
env_epochs)`` returns a ``phase_timing`` payload of everything since the last report and
starts over. Two clock reads per phase entry and exit: cheap enough for every run.

Wall time is ``time.perf_counter``; CPU time is ``time.process_time``, the whole
process's CPU (the hub's thread included), so CPU above wall means several threads were
busy. On CUDA, wall time of a phase only includes device work if the phase ends with a
sync (the loop syncs once per phase); otherwise it measures launches.

While a profile window records, each phase is also a ``record_function`` range, so the
trace shows train / validation / rollout / action / ppo_update spans around the ops; a
window cuts the ranges of the phases open at its steps (``cut_phase_ranges``), so even a
window that lies inside one phase carries it.
"""

from __future__ import annotations

import time
from types import TracebackType

import torch

from leyline import PhaseTime, PhaseTiming

TRAIN = "train"
VALIDATION = "validation"
ROLLOUT = "rollout"
ACTION = "action"
PPO_UPDATE = "ppo_update"
PHASES: tuple[str, ...] = (TRAIN, VALIDATION, ROLLOUT, ACTION, PPO_UPDATE)


_OPEN: list[_Phase] = []
"""Phases entered and not left yet, outermost first, across timers (the profiler is process-wide too)."""


class _Phase:
    """A reusable context manager accumulating one phase's wall and CPU seconds."""

    __slots__ = ("name", "wall", "cpu", "entries", "_w0", "_c0", "_range")

    def __init__(self, name: str) -> None:
        self.name = name
        self.wall = 0.0
        self.cpu = 0.0
        self.entries = 0
        self._w0 = 0.0
        self._c0 = 0.0
        self._range: torch.profiler.record_function | None = None

    def __enter__(self) -> _Phase:
        _OPEN.append(self)
        self.open_range()
        self._w0 = time.perf_counter()
        self._c0 = time.process_time()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.wall += time.perf_counter() - self._w0
        self.cpu += time.process_time() - self._c0
        self.entries += 1
        self.close_range()
        if _OPEN and _OPEN[-1] is self:
            _OPEN.pop()
        elif self in _OPEN:
            _OPEN.remove(self)

    def open_range(self) -> None:
        """Open this phase's ``record_function`` range if a profiler records (a flag read otherwise)."""
        if self._range is None and torch.autograd.profiler._is_profiler_enabled:
            self._range = torch.profiler.record_function(self.name)
            self._range.__enter__()

    def close_range(self) -> None:
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None

    def reset(self) -> None:
        self.wall = self.cpu = 0.0
        self.entries = 0


def cut_phase_ranges(*, reopen: bool = True) -> None:
    """End the profiler ranges of the phases open now and (``reopen``) begin fresh ones.

    A profile window calls it when it starts, around each of its steps and before it stops:
    a range only reaches a trace if it ends while the profiler records, and a window is
    usually opened and closed in the middle of a phase (five batches inside ``train``). So
    each recorded step carries the phases it ran in, including one entered before the window.
    """
    for phase in reversed(_OPEN):
        phase.close_range()
    if reopen:
        for phase in _OPEN:
            phase.open_range()


class PhaseTimer:
    """Per-phase wall and CPU totals since the last report, plus env-epochs per second."""

    def __init__(self, phases: tuple[str, ...] = PHASES) -> None:
        if len(set(phases)) != len(phases) or not phases:
            raise ValueError(f"phase names must be unique and non-empty, got {phases}")
        self._phases = {name: _Phase(name) for name in phases}
        self._since = time.perf_counter()

    def phase(self, name: str) -> _Phase:
        """The context manager of phase ``name`` (one of the names given at construction)."""
        try:
            return self._phases[name]
        except KeyError:
            raise ValueError(f"unknown phase {name!r}; known: {', '.join(self._phases)}") from None

    def totals(self) -> dict[str, tuple[float, float]]:
        """(wall s, CPU s) of each phase entered since the last report."""
        return {p.name: (p.wall, p.cpu) for p in self._phases.values() if p.entries}

    def report(self, round_: int, env_epochs: int) -> PhaseTiming | None:
        """The ``phase_timing`` payload since the last report (None when no phase ran), then reset."""
        now = time.perf_counter()
        elapsed = now - self._since
        phases = [PhaseTime(phase=p.name, wall_ms=p.wall * 1e3, cpu_ms=p.cpu * 1e3)
                  for p in self._phases.values() if p.entries]
        for p in self._phases.values():
            p.reset()
        self._since = now
        if not phases:
            return None
        rate = env_epochs / elapsed if env_epochs > 0 and elapsed > 0 else None
        return PhaseTiming(round=round_, phases=phases, env_epochs_per_s=rate)
