"""``esper-train``: train with live telemetry, or upload a finished run's log."""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NoReturn

from leyline.esper import EsperOutcome
from nissa import LogCorrupt, SecretError, ServerUnavailable, Settings, StragglerConfig, UploadResult
from nissa.parts import upload_run
from ranks import RankError, Ranks
from trainer.cli_flags import add_train_args, add_upload_args, check_telemetry_args, check_upload_args

# torch and the training loop are imported inside the training functions only: `esper-train
# upload` never trains, and starts in a fraction of the time without them.

if TYPE_CHECKING:
    from nissa import DeliveryReport, Run
    from trainer.build import EsperRun
    from trainer.checkpoint import CheckpointConfig
    from trainer.checkpoint.resume import ResumePoint
    from trainer.simic.config import TrainConfig

logger = logging.getLogger(__name__)

USAGE = """esper-train [options]
       torchrun --standalone --nproc-per-node N -m trainer [options]
       esper-train upload RUN_DIR [--server URL] [--token T] [--wait SECONDS] [--timeout SECONDS]"""

EPILOG = """\
Every event goes first to LOG_DIR/<run_id>/events.jsonl and is streamed from there; if the
server is away, training goes on and the events are re-sent when it comes back.

Under torchrun every rank trains --n-envs envs of its own and one shared policy; rank 0 chooses
the run id, and rank N logs to LOG_DIR/<run_id>/events.rankN.jsonl and streams as rank N.

A run whose server never came back is uploaded later (idempotent, safe to repeat):
  esper-train upload LOG_DIR/<run_id> --server http://127.0.0.1:8765
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag gets one line that names it: the usage is long, and --help has it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _say(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


@dataclass(frozen=True)
class Environment:
    """What ``esper-train`` takes from its environment, read in one place (``environment()``) when a parser is
    built; everything else receives these values through the flags."""

    server: str | None
    """``$NISSA_SERVER``: --server's default."""
    token: str | None
    """``$NISSA_TOKEN``: --token's default."""
    run_id: str | None
    """``$NISSA_RUN_ID``: --run-id's default."""


def environment() -> Environment:
    return Environment(server=os.environ.get("NISSA_SERVER"), token=os.environ.get("NISSA_TOKEN"),
                       run_id=os.environ.get("NISSA_RUN_ID"))


def train_parser() -> argparse.ArgumentParser:
    """Every flag made from a dataclass (``trainer.cli_flags``, ``trainer.checkpoint.resume``,
    ``trainer.simic.config``), the ``$NISSA_*`` values as their defaults."""
    from trainer.checkpoint.resume import add_checkpoint_args
    from trainer.simic.config import add_training_args

    env = environment()
    p = _Parser(prog="esper-train", usage=USAGE, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Train an Esper run and stream its events to nissa-server.")
    add_train_args(p, server=env.server, token=env.token, run_id=env.run_id)
    add_checkpoint_args(p)
    add_training_args(p)
    return p


def upload_parser() -> argparse.ArgumentParser:
    env = environment()
    p = _Parser(prog="esper-train upload",
                description="Upload a run's local log and its profile traces to nissa-server (idempotent).")
    add_upload_args(p, server=env.server, token=env.token)
    return p


def _interrupt_on_sigterm() -> None:
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def _finish_through_sigterm() -> None:
    """The run is ending: a SIGTERM now (torchrun stopping the ranks after one died) must not cut off its
    last events; the final flush is bounded by --close-timeout anyway."""
    signal.signal(signal.SIGTERM, lambda signum, frame: logger.info("signal %d while finishing: finishing", signum))


def _settings(args: argparse.Namespace) -> Settings:
    """The run's ``nissa.Settings``, from the telemetry and ranks flags (checked here, once)."""
    return Settings(run_name=args.run_name, run_id=args.run_id or None, log_dir=args.log_dir, server=args.server or "",
                    token=args.token, level=args.telemetry_level, queue_size=args.hub_queue, heartbeat_s=args.heartbeat,
                    rank_timeout_s=args.rank_timeout, stack_watchdog_s=args.stack_watchdog, project=args.project,
                    group=args.group, tags=list(dict.fromkeys(args.tags or ())), notes=args.notes,
                    system_metrics=args.system_metrics, system_metrics_s=args.system_metrics_interval,
                    stragglers=StragglerConfig(factor=args.straggler_factor, epochs=args.straggler_epochs))


def _open(parser: argparse.ArgumentParser, args: argparse.Namespace, config: TrainConfig, settings: Settings) -> Run:
    """The run's ``nissa.Run``, made by ``nissa.init`` as any loop's is (``trainer.build.open_run``): the ranks
    joined, the run id chosen by rank 0 with the run directory and its stream secret, the hub started on the run
    log. What it refuses is a flag's fault, and gets one line naming the flag."""
    from trainer.build import open_run

    recorded = {"telemetry_level": args.telemetry_level, "server": args.server, "hub_queue": args.hub_queue}
    try:
        return open_run(config, settings, recorded=recorded)
    except LogCorrupt as err:
        parser.error(f"--run-id {args.run_id}: its existing log cannot be continued: {err}")
    except OSError as err:
        _log_dir_error(parser, args.log_dir, err)
    except SecretError as err:
        parser.error(f"--log-dir {args.log_dir}: {err}")
    except RankError as err:
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    except ValueError as err:
        parser.error(str(err))


def _log_dir_error(parser: argparse.ArgumentParser, log_dir: object, err: OSError) -> NoReturn:
    where = f" ({err.filename})" if err.filename else ""
    parser.error(f"--log-dir {log_dir}: cannot write the run log: {err.strerror or err}{where}")


def _train(argv: Sequence[str]) -> int:
    from trainer.checkpoint.resume import check_checkpoint_args, resume_target, resumed_config, stored_config
    from trainer.checkpoint.streaming import previous_server
    from trainer.flags import given
    from trainer.simic.config import ConfigError, TrainConfig, training_dests

    parser = train_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        check_telemetry_args(args)  # the telemetry and ranks groups (the training group checks its own)
        checkpoints = check_checkpoint_args(args)
        if args.resume:
            run_dir = resume_target(args)
            config = resumed_config(stored_config(run_dir, args.checkpoint), given(parser, argv, training_dests()))
            args.server_before = args.server is None  # then where it streamed before
            args.server = args.server if args.server is not None else previous_server(run_dir)
        else:
            config = TrainConfig.from_args(args)
        args.server = args.server or None  # --server '': none
        settings = _settings(args)  # a resumed run's id too: its directory's name
    except (ConfigError, ValueError) as err:
        parser.error(str(err))
    run = _open(parser, args, config, settings)
    try:
        return _run(parser, args, config, run, checkpoints)
    finally:
        run.abandon()  # when the run did not get to end: its stream closed, its ranks left; a no-op after its end


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, config: TrainConfig, run: Run,
         checkpoints: CheckpointConfig) -> int:
    """One rank's run, from its first contact with the server to its last line."""
    from trainer.build import build_run
    from trainer.checkpoint.streaming import remember_server, streaming_line
    from trainer.first_contact import token_refused
    from trainer.run_end import end_lines

    ranks = run.ranks
    esper = build_run(config, run, checkpoints)
    if (refused := token_refused(run, args.server)) is not None:
        parser.exit(2, f"{parser.prog}: error: {refused}\n" if refused else "")
    point = _resume_point(parser, args, ranks, run.run_dir, config.rounds) if args.resume else None
    remember_server(run.run_dir, args.server)
    _say(f"run id: {run.run_id}")
    log_path = run.log_path
    _say(f"run log: {log_path}")
    if ranks.is_main:
        line, to_stderr = streaming_line(args.server, getattr(args, "server_before", False), log_path, run.run_dir)
        _say(line, err=to_stderr)
    _interrupt_on_sigterm()
    summary, report = _train_and_end(args, esper, point)
    last = esper.checkpoints.written[-1].path if esper.checkpoints.written else None
    for line, to_stderr in end_lines(run.run_id, ranks.rank if ranks.distributed else None, summary, report,
                                     run.run_dir, last):
        _say(line, err=to_stderr)
    return {"completed": 0, "stopped": 0, "interrupted": 130}.get(summary.status, 1)


def _train_and_end(args: argparse.Namespace, esper: EsperRun,
                   point: ResumePoint | None) -> tuple[EsperOutcome, DeliveryReport]:
    """Start (or resume) the run, train it, and end it however training ended: ``run_finished`` always goes
    last, with the status and the error."""
    from trainer.data import DataError

    start = time.monotonic()
    summary = EsperOutcome(status="failed", duration_s=0.0, error="did not start")
    try:
        if point is None:
            esper.run.start()
        else:  # failing before it resumes, the run's continued log gets no second run_started (Run.end)
            esper.run.resume(point.resumed(), point.state["control"])
            _say(f"resumed from {point.path} (round {point.round})")
        # After run_started: it may open windows. Both flags: the update window waits for the first.
        esper.run.open_start_windows(profile_batches=args.profile, profile_update=args.profile_update)
        summary = esper.train(resume=None if point is None else point.state)
    except KeyboardInterrupt:
        summary = _cut_short(esper, start, "interrupted")
    except (RankError, DataError) as err:  # a rank died or hung; the data turned out unreadable: said, not a bug
        _say(f"esper-train: error: {err}", err=True)
        summary = _cut_short(esper, start, "failed", str(err))
    except Exception as err:  # a failed run still ends its log with run_finished, and exits non-zero
        logger.exception("training failed")
        summary = _cut_short(esper, start, "failed", f"{type(err).__name__}: {err}")
    finally:
        _finish_through_sigterm()
        report = esper.end(summary, timeout=args.close_timeout)
    return summary, report


def _cut_short(esper: EsperRun, start: float, status: Literal["failed", "interrupted"],
               error: str | None = None) -> EsperOutcome:
    return EsperOutcome(status=status, duration_s=time.monotonic() - start, epochs=esper.hooks.epoch,
                       error=None if error is None else error[:2000])


def _resume_point(parser: argparse.ArgumentParser, args: argparse.Namespace, ranks: Ranks, run_dir: pathlib.Path,
                  rounds: int) -> ResumePoint:
    from trainer.checkpoint import CheckpointError
    from trainer.checkpoint.resume import resume_point

    try:
        return resume_point(run_dir, args.checkpoint, ranks, rounds)
    except CheckpointError as err:
        parser.error(str(err))


def _upload(argv: Sequence[str]) -> int:
    parser = upload_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        check_upload_args(args)
    except ValueError as err:
        parser.error(str(err))

    def waiting(why: str) -> None:
        _say(f"esper-train upload: --server {args.server}: {why}; waiting up to {args.wait:g} s", err=True)

    try:
        results = upload_run(args.run_dir, args.server, args.token, timeout=args.timeout, wait_s=args.wait,
                             on_wait=waiting)
    except (ValueError, FileNotFoundError, LogCorrupt) as err:
        parser.error(str(err))
    except ServerUnavailable as err:
        hint = f"gave up after --wait {args.wait:g} s" if args.wait else "is it running? --wait SECONDS retries"
        _say(f"esper-train upload: --server {args.server}: no nissa-server answers: {err} ({hint})", err=True)
        return 1
    for r in results:
        _say(_describe_upload(r))
    return 0 if all(r.complete for r in results) else 1


def _describe_upload(r: UploadResult) -> str:
    events_state = "complete" if r.stored >= r.events else f"INCOMPLETE ({r.error or 'timed out'})"
    line = (f"{r.path}: run {r.run_id} rank {r.rank}: {r.events} events, {r.sent} sent, "
            f"server holds {r.stored}: {events_state}")
    if r.traces is not None and (r.traces.sent or r.traces.held or r.traces.missing or r.traces.errors):
        line += f"; {r.traces.describe()}" + ("" if not r.traces.errors else ": INCOMPLETE")
    return line


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "upload":
        return _upload(argv[1:])
    return _train(argv)


if __name__ == "__main__":
    raise SystemExit(main())
