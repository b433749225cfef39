"""nissa: the client library that puts any PyTorch training loop on a Nissa server.

    import nissa
    run = nissa.init(server="http://127.0.0.1:8765", run_name="my-run", config={"lr": 0.1})

What a loop's author uses, and all ``nissa`` exports (``__all__``):

- ``init`` starts a run from ``Settings`` (its arguments, checked) and returns its ``Run``: ``log``, ``step``,
  ``watch``, ``phase``, ``command``, ``on_checkpoint``, ``on_stop``, ``finish`` (a ``DeliveryReport``); a loop that
  counts its own steps reports them to ``run.hooks``. ``Histogram`` is a distribution to ``run.log``;
  ``StragglerConfig`` says when a rank is slow under torchrun.
- ``upload`` sends a run logged without a server to one later (an ``UploadResult`` per rank); ``Api`` reads a
  lab's runs back (``ApiError`` when the server refuses); the ``nissa`` command does from a shell (``nissa runs``).
- ``LogCorrupt``, ``SecretError``, ``ServerUnavailable``: what ``init`` and ``upload`` raise beyond ``ValueError``,
  ``TypeError`` and ``OSError``.
- ``integrations``: Lightning, Transformers, Accelerate and a TensorBoard ``SummaryWriter``.

The parts a run is made of (its hub, command runtime, windows, collectors' building blocks), for a loop that wires
its own run, are in ``nissa.parts``. Importing ``nissa`` imports neither torch nor the hub; ``init`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nissa.lazy import attach

if TYPE_CHECKING:  # the exported names, listed once: the type checker reads them, ``nissa.lazy`` loads them
    import pathlib
    from collections.abc import Callable

    from nissa import integrations as integrations
    from nissa.api import Api as Api
    from nissa.api import ApiError as ApiError
    from nissa.histogram import Histogram as Histogram
    from nissa.hub.rest import ServerUnavailable as ServerUnavailable
    from nissa.hub.runlog import LogCorrupt as LogCorrupt
    from nissa.hub.secret import SecretError as SecretError
    from nissa.hub.stats import DeliveryReport as DeliveryReport
    from nissa.hub.upload import UploadResult as UploadResult
    from nissa.run import Run as Run
    from nissa.settings import Settings as Settings
    from nissa.telemetry.stragglers import StragglerConfig as StragglerConfig

__getattr__, _LAZY = attach(__name__, __file__)
__all__ = ["init", "upload", *_LAZY]


def init(settings: Settings | None = None, /, **given: Any) -> Run:
    """Start a run and return its ``Run``: the run directory ``<log_dir>/<run_id>`` with its log and stream
    secret, the hub that streams the log to the server, the command runtime. ``given``: ``Settings``' fields
    (``server``, ``run_name``, ``config``, ``log_dir``, ``project``, ``tags``…; over ``settings``' where both are
    given). ``run_started`` (with the commands declared by then) goes out at the first ``run.step()``,
    ``run.log()`` or ``with run:``. Under torchrun every rank calls it (the process group is joined unless the loop
    made it). A bad setting is a ``ValueError`` or ``TypeError`` naming it; a ``log_dir`` that cannot be written the
    ``OSError`` that says why (a note names ``log_dir``), a run log of ``run_id`` that cannot be continued
    ``LogCorrupt``, a rank gone while the ranks meet ``ranks.RankError``."""
    import dataclasses

    import torch.distributed as dist

    from nissa.checks import resolved_device
    from nissa.join import agree_on_run
    from nissa.run import Run
    from nissa.runtime import RuntimeConfig, build_runtime
    from nissa.settings import Settings
    from nissa.sweep import probed
    from nissa.sweep import trial as sweep_trial
    from ranks import RanksConfig, join_ranks

    s = Settings(**given) if settings is None else dataclasses.replace(settings, **given)
    s = sweep_trial.applied(s)  # a sweep's trial: its agent's run id, values, project, group and tag
    probe = probed.current()  # ``nissa sweep create``'s probe: no server, reports the hooks at the first step
    s = s if probe is None else probed.applied(s, probe)
    joined_here = not (dist.is_available() and dist.is_initialized())
    ranks = join_ranks(s.device, RanksConfig(timeout_s=s.rank_timeout_s))
    runtime = None
    try:
        run_id = agree_on_run(ranks, s.log_root, s.run_id, s.run_name)
        runtime = build_runtime(RuntimeConfig(hub=s.hub(run_id, ranks.rank), level=s.telemetry_level, ranks=ranks,
                                              agree=s.agree, env_base=ranks.rank * s.envs_per_rank))
        device = ranks.device_name(resolved_device(s.device))  # a CUDA rank's own GPU, which it samples too
        run = Run(runtime, s, device=device, close_ranks=joined_here and ranks.distributed)
        if probe is not None:
            probed.watch(run, probe)
        return run
    except BaseException as err:
        if isinstance(err, OSError):
            err.add_note(f"nissa.init: log_dir {str(s.log_root)!r}: cannot write the run's directory or log")
        if runtime is not None:
            runtime.hub.close(1.0)
        if joined_here:
            ranks.close()
        raise


def upload(run_dir: str | pathlib.Path, server: str, token: str | None = None, timeout: float = 60.0, *,
           wait_s: float = 0.0, on_wait: Callable[[str], None] | None = None) -> list[UploadResult]:
    """Send a run logged without a server (or cut off from it) to ``server``, idempotently, with its traces
    and stack files; one result per rank's log says what the server holds now. ``wait_s``: how long to wait for
    a server that does not answer yet (``on_wait`` hears why it waits).

    ``FileNotFoundError`` when ``run_dir`` (``<log_dir>/<run_id>``) holds no run log, ``ValueError`` for a
    malformed ``server``, ``ServerUnavailable`` (naming the server) when none answers there."""
    import pathlib

    from nissa.checks import check_server
    from nissa.hub.rest import ServerUnavailable
    from nissa.hub.upload import upload_run

    check_server(server, "server", "nissa.upload")
    try:
        return upload_run(pathlib.Path(run_dir), server, token, timeout=timeout, wait_s=wait_s, on_wait=on_wait)
    except ServerUnavailable as err:
        raise ServerUnavailable(f"nissa.upload: no nissa-server answers at {server}: {err}") from None
