"""What a run's result panels show, defined once for the console and the web page: a profile window's top
operators as a table (the figures each viewer prints, not the raw microseconds each would format its own way),
and the windows a run's page lists; and which client's own panels a run has (``client_panels``: Esper's env grid,
seed log and PPO health), registered here as its kinds are in the kinds table."""

from __future__ import annotations

from collections.abc import Collection

import msgspec

from leyline.enums import Kind, ProfileTarget
from leyline.esper.panels import PANEL_KINDS as ESPER_PANEL_KINDS
from leyline.esper.panels import PANELS as ESPER_PANELS
from leyline.payloads_ops import ProfileCompleted, TopOp

CLIENT_PANELS: dict[str, frozenset[Kind]] = {ESPER_PANELS: ESPER_PANEL_KINDS}
"""Each client's panels by name (a run's page reads them at ``GET /runs/{run_id}/<name>``), declared beside its
payloads (``leyline.esper.panels``), and the kinds whose events make a run one of that client's."""


def client_panels(kinds: Collection[str]) -> list[str]:
    """The clients' panels a run has, from the kinds (by name) it has events of: the one rule the server serves
    with a run (``RunDetail.panels``) and the console applies to the events it folds."""
    return [name for name, own in CLIENT_PANELS.items() if any(kind.value in kinds for kind in own)]


OPS_COLUMNS = ("op", "calls", "cpu ms", "self ms")
CUDA_COLUMN = "cuda ms"


class OpsTable(msgspec.Struct, kw_only=True, frozen=True):
    """A profile window's operators that cost most, as both viewers show them: a column per figure (``cuda ms``
    only where some operator ran on CUDA), each cell the text shown, the costliest first."""

    columns: list[str]
    rows: list[list[str]]


def _ms(us: float | None) -> str:
    return "—" if us is None else f"{us / 1e3:.2f}"


def ops_table(top_ops: list[TopOp] | tuple[TopOp, ...]) -> OpsTable:
    """The table of a window's top operators (a CPU-only run has no CUDA column)."""
    cuda = any(op.cuda_time_us is not None for op in top_ops)
    columns = [*OPS_COLUMNS, *((CUDA_COLUMN,) if cuda else ())]
    rows = [[op.name, str(op.calls), _ms(op.cpu_time_us), _ms(op.self_cpu_time_us),
             *((_ms(op.cuda_time_us),) if cuda else ())] for op in top_ops]
    return OpsTable(columns=columns, rows=rows)


class ProfileWindow(msgspec.Struct, kw_only=True, frozen=True):
    """One closed profile window of a run (``GET /runs/{run_id}/profiles``): what it recorded, where its trace is,
    and its top operators' table."""

    window: str
    rank: int
    command_id: str | None
    target: ProfileTarget
    batches: int
    wall_s: float
    trace_path: str
    """The trace file on the trainer's machine."""
    artifact: str | None
    """The trace uploaded to the server (``/runs/{run_id}/artifacts/{artifact}``), None where it was not."""
    ops: OpsTable
    open_with: str
    """The one command that opens the trace in Perfetto's UI (its ``open_trace_in_ui`` serves the file from this
    machine to the UI in the browser: the trace is never uploaded anywhere)."""


PERFETTO_OPENER = "https://raw.githubusercontent.com/google/perfetto/main/tools/open_trace_in_ui"


def open_command(trace_file: str) -> str:
    """The one command that opens a downloaded trace file in Perfetto's UI."""
    return f"curl -sLO {PERFETTO_OPENER} && python3 open_trace_in_ui -i {trace_file}"


def profile_window(done: ProfileCompleted, rank: int) -> ProfileWindow:
    """A closed window as the page lists it."""
    trace = done.artifact or done.trace_path.rsplit("/", 1)[-1]
    return ProfileWindow(window=done.window, rank=rank, command_id=done.command_id, target=done.target,
                         batches=done.batches, wall_s=done.wall_s, trace_path=done.trace_path, artifact=done.artifact,
                         ops=ops_table(done.top_ops), open_with=open_command(trace))
