"""When checkpoints are taken, off the training thread: every N rounds, on ``checkpoint``, on ``stop``.

At the end of a round the ``Checkpointer`` takes one if it is due (``every`` rounds), asked for (a
``checkpoint`` command applied during the round) or the run is to stop. The training thread only
copies the state to host memory (``state.capture``, timed: the pause); a writer thread serializes and
writes it (``files.CheckpointStore``). The run waits for an unfinished write only when the next
checkpoint comes, or the run ends. The commands complete, on the training thread, once their
checkpoint is on disk, with its path, size and step.

``stop`` ends the run at the end of the epoch in progress. Mid-round there is no state a resume could
repeat exactly (hosts, seeds and the rollout would all have to be saved), so the run keeps the copy of
its last round boundary in host memory (taken at every round end, written or not) and, on ``stop``,
writes that one, unless it is on disk already: a resumed run trains the unfinished round again, exactly
as the uninterrupted run would have.

In a run of several ranks the commands are applied at one step on every rank (the ranks' agreement),
so every rank checkpoints the same round, each its own part, and every rank stops at the same epoch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from leyline import CheckpointRequest, StopRequest
from nissa.parts import CommandContext, CommandRejected, Handles
from trainer.checkpoint.files import CheckpointError, CheckpointStore, Written, checkpoint_name
from trainer.checkpoint.state import Totals, capture
from trainer.simic.vectorized import VectorizedTrainer

logger = logging.getLogger(__name__)

DEFAULT_EVERY = 1
DEFAULT_KEEP = 3


@dataclass(frozen=True)
class CheckpointConfig:
    """When a run checkpoints and how many it keeps."""

    every: int = DEFAULT_EVERY
    """Checkpoint every this many rounds (0: only when asked). One: at a round boundary a checkpoint is
    the policy and its optimizer (hosts are rebuilt every round), small next to a round's work, and a
    run that dies loses at most the round in progress."""
    keep: int = DEFAULT_KEEP
    """Complete checkpoints kept (the oldest deleted first); at least 1."""

    def __post_init__(self) -> None:
        if not isinstance(self.every, int) or self.every < 0:
            raise ValueError(f"--checkpoint-every: must be an integer >= 0, got {self.every!r}")
        if not isinstance(self.keep, int) or self.keep < 1:
            raise ValueError(f"--keep-checkpoints: must be an integer >= 1, got {self.keep!r}")


@dataclass
class _Snapshot:
    """A round boundary's state in host memory, written or not."""

    name: str
    round: int
    step: int
    epoch: int
    pause_s: float
    state: dict[str, Any]


@dataclass
class _Job:
    """One checkpoint being written, and the commands waiting for it."""

    name: str
    round: int
    step: int
    epoch: int
    pause_s: float
    waiting: list[CommandContext[Any]] = field(default_factory=list)
    """The ``checkpoint`` and ``stop`` commands this write completes."""
    outcome: Written | Exception | None = None
    thread: threading.Thread | None = None


class Checkpointer:
    """Takes a run's checkpoints; see the module docstring."""

    def __init__(self, config: CheckpointConfig, store: CheckpointStore, *, run_config: dict[str, Any],
                 manifest: dict[str, Any], hub_seq: Callable[[], int], control_state: Callable[[], dict[str, Any]],
                 prunes: bool = True) -> None:
        """``manifest``: what every manifest says of the run (run id, world size); ``hub_seq``: the last seq
        logged; ``control_state``: the telemetry level and open windows; ``prunes``: this rank deletes old
        checkpoints (one rank of several does)."""
        self.config, self.store = config, store
        self._run_config, self._manifest = run_config, manifest
        self._hub_seq, self._control_state = hub_seq, control_state
        self._prunes = prunes
        self._asked: list[CommandContext[CheckpointRequest]] = []
        self.stop_asked: CommandContext[StopRequest] | None = None
        self._job: _Job | None = None
        self._boundary: _Snapshot | None = None
        self.written: list[Written] = []
        """Every checkpoint this process wrote, oldest first."""

    def register(self, handle: Handles) -> None:
        """Handle ``checkpoint`` and ``stop`` (``handle``: the run's ``Run.handle``)."""
        handle(CheckpointRequest, _CheckpointCommand(self))
        handle(StopRequest, _StopCommand(self))

    # --- the training thread ---------------------------------------------------------------------

    def begin(self, trainer: VectorizedTrainer, totals: Totals, *, resumed: bool = False) -> None:
        """The run starts (or, ``resumed``, goes on from its checkpoint) at round ``totals.round``: the
        boundary a ``stop`` in its first round goes back to. A resumed run's is on disk already: it is never
        written again (a rewrite could only lose it)."""
        self._boundary = self._capture(trainer, totals)
        if resumed and self.store.complete(self._boundary.name):  # resumed from this store (not a copy)
            self.written.append(self._on_disk(self._boundary))

    def _on_disk(self, snapshot: _Snapshot) -> Written:
        """``snapshot``'s checkpoint as this rank's manifest describes it."""
        manifest = self.store.manifest(snapshot.name)
        size = sum(int(entry.get("bytes", 0)) for entry in manifest["files"].values())
        return Written(snapshot.name, self.store.root / snapshot.name, size, snapshot.round, snapshot.step,
                       snapshot.epoch, float(manifest.get("pause_s", 0.0)), 0.0)

    def stopping(self) -> bool:
        """A ``stop`` was applied: the loop ends the round at the end of this epoch."""
        return self.stop_asked is not None

    def round_end(self, trainer: VectorizedTrainer, totals: Totals) -> bool:
        """After round ``totals.round``: checkpoint if due; True when the run is to stop now."""
        self._boundary = snapshot = self._capture(trainer, totals)
        stopping = self.stop_asked is not None
        due = self.config.every > 0 and totals.round % self.config.every == 0
        if due or self._asked or stopping:
            self._start(snapshot, self._take_waiting())
        if stopping:
            self.finish()
        return stopping

    def stop_mid_round(self) -> None:
        """``stop`` ended the run inside a round: its checkpoint is the last round boundary's, written now
        unless it is on disk (or being written) already; the commands waiting complete with it."""
        snapshot, waiting = self._boundary, self._take_waiting()
        assert snapshot is not None, "begin() takes the first boundary"
        job = self._job
        done = next((w for w in reversed(self.written) if w.name == snapshot.name), None)
        if job is not None and job.name == snapshot.name:
            job.waiting += waiting
        elif done is not None:
            for ctx in waiting:
                ctx.complete(_result(done))
        else:
            self._start(snapshot, waiting)
        self.finish()

    def _take_waiting(self) -> list[CommandContext[Any]]:
        waiting = self._asked + ([self.stop_asked] if self.stop_asked is not None else [])
        self._asked = []
        return waiting

    def poll(self) -> None:
        """Complete the commands of a checkpoint whose write has ended (called at every step)."""
        job = self._job
        if job is not None and job.thread is not None and not job.thread.is_alive():
            self._settle(job)

    def finish(self) -> None:
        """Wait for the write under way, if any, and complete its commands (the run's end)."""
        job = self._job
        if job is not None and job.thread is not None:
            job.thread.join()
            self._settle(job)

    def _capture(self, trainer: VectorizedTrainer, totals: Totals) -> _Snapshot:
        """The run's state at this round boundary, in host memory (timed: the pause)."""
        sites = trainer.sites
        telemetry = sites.state_dict() if hasattr(sites, "state_dict") else None  # the null sites keep nothing
        begin = time.perf_counter()
        state = capture(trainer, totals, config=self._run_config, telemetry=telemetry,
                        control=self._control_state(), hub_seq=self._hub_seq())
        pause = time.perf_counter() - begin
        return _Snapshot(checkpoint_name(totals.round), totals.round, trainer.step, trainer.epoch, pause, state)

    def _start(self, snapshot: _Snapshot, waiting: list[CommandContext[Any]]) -> None:
        self.finish()  # one write at a time: the previous one must be on disk before the next begins
        job = _Job(snapshot.name, snapshot.round, snapshot.step, snapshot.epoch, snapshot.pause_s, waiting)
        manifest = {**self._manifest, "config": self._run_config, "round": job.round, "step": job.step,
                    "epoch": job.epoch, "hub_seq": snapshot.state["hub"]["seq"],
                    "torch_version": str(torch.__version__), "created_at": time.time(), "pause_s": job.pause_s}
        job.thread = threading.Thread(target=self._write, args=(job, snapshot.state, manifest), daemon=True,
                                      name=f"checkpoint-writer-{job.name}")
        self._job = job
        job.thread.start()

    def _write(self, job: _Job, state: dict[str, Any], manifest: dict[str, Any]) -> None:
        begin = time.perf_counter()
        try:
            size = self.store.write(job.name, state, manifest)
            if self._prunes:
                self.store.prune(self.config.keep)
        except (OSError, RuntimeError, CheckpointError) as err:  # a full disk fails the checkpoint, not the run
            logger.error("checkpoint %s could not be written: %s", job.name, err)
            job.outcome = err
            return
        job.outcome = Written(job.name, self.store.root / job.name, size, job.round, job.step, job.epoch,
                              job.pause_s, time.perf_counter() - begin)

    def _settle(self, job: _Job) -> None:
        self._job = None
        outcome = job.outcome
        if isinstance(outcome, Written):
            self.written.append(outcome)
            logger.info("checkpoint %s: %d bytes, pause %.1f ms, written in %.1f ms", outcome.name, outcome.bytes,
                        outcome.pause_s * 1e3, outcome.write_s * 1e3)
            for ctx in job.waiting:
                ctx.complete(_result(outcome))
        else:
            for ctx in job.waiting:
                ctx.fail(f"checkpoint {job.name} could not be written: {outcome}")


def _result(written: Written) -> dict[str, Any]:
    """What a command completed by ``written`` reports."""
    return {"path": str(written.path), "bytes": written.bytes, "step": written.step, "round": written.round,
            "pause_ms": round(written.pause_s * 1e3, 3)}


class _CheckpointCommand:
    """``checkpoint``: one at the end of the round in progress; completes once it is on disk."""

    def __init__(self, owner: Checkpointer) -> None:
        self.owner = owner

    def apply(self, ctx: CommandContext[CheckpointRequest]) -> None:
        self.owner._asked.append(ctx)

    def step_boundary(self, step: int, epoch: int) -> None:
        self.owner.poll()


class _StopCommand:
    """``stop``: finish the epoch in progress, checkpoint (the last round boundary, or this one if the epoch
    ends the round), end the run ``stopped``."""

    def __init__(self, owner: Checkpointer) -> None:
        self.owner = owner

    def apply(self, ctx: CommandContext[StopRequest]) -> None:
        if self.owner.stop_asked is not None:
            raise CommandRejected(f"the run is already stopping ({self.owner.stop_asked.command_id})")
        self.owner.stop_asked = ctx
