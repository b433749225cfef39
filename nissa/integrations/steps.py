"""What the integrations share of steps: a boundary at the loop's own count (``run.step(at=…)``), never a +1."""

from __future__ import annotations

from nissa.run import Run


def is_new(run: Run, step: int) -> bool:
    """``step`` (the loop's own count) is past the run's step in progress (any step is, before the first)."""
    current = run.current_step
    return current is None or step > current


def boundary_at(run: Run, step: int | None) -> None:
    """In a run of one process, a step boundary at the loop's own ``step`` where it is a new one (several values
    logged at one step make one boundary); nothing under torchrun, where every rank calls ``run.step()`` itself
    since only the main process logs."""
    if step is not None and not run.ranks.distributed and is_new(run, int(step)):
        run.step(at=int(step))


def step_to(run: Run, step: int) -> None:
    """A step boundary at a trainer's own global ``step``, or at the run's next one where a run handed in is
    past it already."""
    run.step(at=step if is_new(run, step) else None)
