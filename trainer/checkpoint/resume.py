"""``esper-train --resume LOG_DIR/<run_id> [--checkpoint NAME]``: which checkpoint, and the run's config.

A resumed run is the same run: its id and log dir come from ``--resume``, its training config from the
checkpoint. Training flags given again must agree with it, except those that do not change what is
computed (``RESUMABLE``): ``--rounds`` asks for more rounds, say. The newest checkpoint that checks
out is taken unless ``--checkpoint`` names one; a named one that does not check out is refused with
the newest good one before it offered.
"""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
from dataclasses import dataclass
from typing import Any

from leyline import RunResumed
from ranks import Ranks
from trainer import flags
from trainer.checkpoint.control import CheckpointConfig
from trainer.checkpoint.files import CheckpointError, CheckpointStore, is_checkpoint_name
from trainer.flags import FieldError
from trainer.simic.config import ConfigError, TrainConfig, parse_slots, training_dests

logger = logging.getLogger(__name__)

RESUMABLE = frozenset({"rounds", "log_every", "cpu_threads", "device"})
"""Training flags a resumed run may change (the rest are the checkpoint's)."""


def store_of(run_dir: pathlib.Path, rank: int = 0) -> CheckpointStore:
    return CheckpointStore(run_dir / "checkpoints", rank)


def resume_target(args: argparse.Namespace) -> pathlib.Path:
    """``--resume``'s run directory; sets ``args.log_dir`` and ``args.run_id`` from it."""
    run_dir = pathlib.Path(args.resume)
    if run_dir.name in ("", ".", ".."):  # "." or "..": the name is the run id, so take the real one
        run_dir = run_dir.resolve()
    if not (run_dir / "checkpoints").is_dir():
        raise ValueError(f"--resume {args.resume}: no checkpoints there (a run directory LOG_DIR/<run_id> "
                         "holds them under checkpoints/)")
    if args.run_id and args.run_id != run_dir.name:
        raise ValueError(f"--run-id {args.run_id}: a resumed run keeps its id ({run_dir.name}); leave --run-id out")
    args.log_dir, args.run_id = str(run_dir.parent), run_dir.name
    return run_dir


def choose(run_dir: pathlib.Path, wanted: str | None) -> str:
    """The checkpoint to resume from (``wanted``, or the newest complete one), checked: sizes and
    checksums of every rank's part. One that was never finished (no manifest: the process died while
    writing it) is passed over; one that does not check out is refused, the previous good one offered."""
    store = store_of(run_dir)
    if wanted is None:
        complete = [n for n in store.names() if store.complete(n)]
        if not complete:
            raise CheckpointError(f"--resume {run_dir}: no complete checkpoint in {store.root}")
        wanted = complete[-1]
    try:
        store.verify(wanted)
    except CheckpointError as err:
        previous = store.latest_good(before=wanted)
        offer = (f"; the previous good one is {previous}: --resume {run_dir} --checkpoint {previous}"
                 if previous else "; no earlier checkpoint checks out")
        raise CheckpointError(f"--resume {run_dir}: {err}{offer}") from None
    return wanted


def stored_config(run_dir: pathlib.Path, wanted: str | None) -> dict[str, Any]:
    """The training config written with the checkpoint (its manifest's, readable before the ranks meet)."""
    store = store_of(run_dir)
    names = [wanted] if wanted else [n for n in reversed(store.names()) if store.complete(n)]
    for name in names:
        try:
            config = store.manifest(name, 0).get("config")
        except CheckpointError:
            continue
        if isinstance(config, dict):
            return config
    raise CheckpointError(f"--resume {run_dir}: no complete checkpoint there" if not wanted
                          else f"--checkpoint {wanted}: no such complete checkpoint in {store.root}")


LEGACY_KEYS = {"ppo_epochs": "ppo_update_epochs", "entropy_coef": "ppo_entropy_coef"}
"""Where a checkpoint written before the PPO fields were ``ppo.<field>`` keeps two of them."""


def resumed_config(stored: dict[str, Any], given: dict[str, Any]) -> TrainConfig:
    """The checkpoint's config (its flat ``run_started`` view) with the flags a resume may change; any other
    flag ``given`` (``trainer.flags.given``: the values the command line spelled out) must agree with it."""
    dests = set(training_dests())
    values = {LEGACY_KEYS.get(k, k).replace(".", "_"): v for k, v in stored.items()}
    values = {k: v for k, v in values.items() if k in dests}
    host_blocks = int(values.get("host_blocks", TrainConfig.host_blocks))
    for dest, value in sorted(given.items()):
        if dest in RESUMABLE:
            values[dest] = value
            continue
        same = (parse_slots(str(value), host_blocks) == parse_slots(str(values.get(dest, "")), host_blocks)
                if dest == "slots" else value == values.get(dest))
        if not same:
            raise ConfigError(f"--{dest.replace('_', '-')}: the checkpoint was taken with {values.get(dest)!r}, "
                              f"not {value!r} (a resumed run keeps its training config)")
    return TrainConfig.from_args(argparse.Namespace(**values))


@dataclass(frozen=True)
class CheckpointFlags:
    """When a run checkpoints, and which run and checkpoint it goes on from (``esper-train``'s "checkpoints")."""

    checkpoint_every: int = CheckpointConfig.every
    """Checkpoint every ROUNDS rounds under LOG_DIR/<run_id>/checkpoints/ (0: only when asked by a checkpoint or
    stop command)."""
    keep_checkpoints: int = CheckpointConfig.keep
    """Complete checkpoints kept, the oldest deleted first."""
    resume: str | None = None
    """Go on with that run from its newest checkpoint: the same run id, log and training config (--rounds may ask
    for more rounds; none: a new run)."""
    checkpoint: str | None = None
    """With --resume: the checkpoint to go on from (round-NNNNNN; none: the newest complete one)."""

    def __post_init__(self) -> None:
        if self.checkpoint and not self.resume:
            raise FieldError("checkpoint", "only with --resume LOG_DIR/RUN_ID")
        if self.checkpoint is not None and not is_checkpoint_name(self.checkpoint):
            raise FieldError("checkpoint", "a checkpoint's name, round-NNNNNN (a directory under "
                                           "LOG_DIR/<run_id>/checkpoints/), not a path", value=self.checkpoint)
        flags.as_field_error("checkpoint_every", lambda: CheckpointConfig(every=self.checkpoint_every))
        flags.as_field_error("keep_checkpoints", lambda: CheckpointConfig(keep=self.keep_checkpoints))

    @property
    def config(self) -> CheckpointConfig:
        return CheckpointConfig(every=self.checkpoint_every, keep=self.keep_checkpoints)


def add_checkpoint_args(parser: argparse.ArgumentParser) -> None:
    """The "checkpoints" group, a flag for every ``CheckpointFlags`` field."""
    flags.add_fields(parser.add_argument_group("checkpoints"), CheckpointFlags,
                     metavars={"checkpoint_every": "ROUNDS", "keep_checkpoints": "K", "resume": "LOG_DIR/RUN_ID",
                               "checkpoint": "NAME"})


def check_checkpoint_args(args: argparse.Namespace) -> CheckpointConfig:
    """The checkpoint flags' bounds; ValueError names the flag."""
    return flags.build(CheckpointFlags, flags.values(args, CheckpointFlags)).config


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a rank goes on from."""

    name: str
    path: pathlib.Path
    state: dict[str, Any]

    @property
    def round(self) -> int:
        return int(self.state["progress"]["round"])

    def resumed(self) -> RunResumed:
        progress = self.state["progress"]
        return RunResumed(checkpoint=self.name, path=str(self.path), round=self.round,
                          checkpoint_step=int(progress["step"]), checkpoint_epoch=int(progress["epoch"]),
                          checkpoint_seq=int(self.state["hub"]["seq"]), pid=os.getpid())


def resume_point(run_dir: pathlib.Path, wanted: str | None, ranks: Ranks, rounds: int) -> ResumePoint:
    """Rank 0 chooses and checks the checkpoint, every rank loads its own part of it. CheckpointError:
    one line naming the checkpoint (on every rank: the others hear rank 0 could not choose)."""
    chosen: str | None = None
    failure = ""
    if ranks.is_main:
        try:
            chosen = choose(run_dir, wanted)
        except CheckpointError as err:
            failure = str(err)
        else:
            moved = store_of(run_dir).set_aside_after(chosen)
            if moved is not None:
                logger.warning("checkpoints after %s moved to %s: this run goes on from %s", chosen, moved, chosen)
    chosen = ranks.agree(chosen)
    if chosen is None:
        raise CheckpointError(failure or f"--resume {run_dir}: rank 0 found no checkpoint to resume from")
    store = store_of(run_dir, ranks.rank)
    world = int(store.manifest(chosen, 0).get("world_size", 1))
    if world != ranks.world_size:
        raise CheckpointError(f"--resume {run_dir}: checkpoint {chosen} was taken by {world} rank(s), "
                              f"this run has {ranks.world_size}")
    point = ResumePoint(chosen, store.root / chosen, store.load(chosen))
    if point.round >= rounds:
        raise CheckpointError(f"--rounds {rounds}: checkpoint {chosen} already holds {point.round} rounds; "
                              f"ask for more with --rounds")
    return point
