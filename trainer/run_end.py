"""What ``esper-train`` says when a run ends: its status and delivery, what is left to upload, its last
checkpoint, and after Ctrl-C how to go on. Under torchrun every rank says it, so each line names the rank."""

from __future__ import annotations

import pathlib

from leyline.esper import EsperOutcome
from nissa import DeliveryReport


def end_lines(run_id: str, rank: int | None, summary: EsperOutcome, report: DeliveryReport, run_dir: pathlib.Path,
              last_checkpoint: pathlib.Path | None) -> list[tuple[str, bool]]:
    """The lines, each with whether it goes to stderr; ``rank`` None: a run of one process."""
    who = f"run {run_id}" + ("" if rank is None else f" rank {rank}")
    lines = [(f"{who} {summary.status}: {report.describe()}", False)]
    tag = "" if rank is None else f"rank {rank}: "
    if report.unsent:
        lines.append((f"{tag}not delivered: {report.unsent} events; upload later with: "
                      f"esper-train upload {run_dir} --server URL", True))
    if report.pending or report.lost:
        lines.append((f"{tag}not logged: {report.pending + report.lost} events", True))
    if last_checkpoint is not None:
        lines.append((f"{tag}last checkpoint: {last_checkpoint}", False))
    if summary.status == "interrupted" and rank in (None, 0):
        has_checkpoint = last_checkpoint is not None or any((run_dir / "checkpoints").glob("round-*/rank0.json"))
        lines.append((f"to go on from its last checkpoint: esper-train --resume {run_dir}" if has_checkpoint else
                       "no checkpoint was written before the interrupt: there is nothing to resume from", True))
    return lines
