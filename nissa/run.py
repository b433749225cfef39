"""``Run``: Nissa for any PyTorch loop (made by ``nissa.init``).

    run = nissa.init(server="http://127.0.0.1:8765", run_name="mnist", config={"lr": 0.1})
    run.watch(model)                                   # debug windows: per-layer statistics

    @run.command("set_lr", help="Set the learning rate")
    def set_lr(value: float) -> dict:
        for group in opt.param_groups:
            group["lr"] = value
        return {"lr": value}

    for batch in data:
        with run.step():                               # a step boundary: commands apply here
            loss = train_step(batch)
            run.log({"loss": loss})                    # named scalars (tensors read in one transfer)
        if run.should_stop:                            # a ``stop`` command
            break
    run.finish()

Every event goes to the local run log first and is streamed from there (``nissa.hub``): ``log`` never
blocks and never raises for the network. Commands apply only at step boundaries, at one agreed step on
every rank under torchrun (``nissa.runtime``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import time
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Literal

import msgspec
import torch

from leyline import (
    CallRequest,
    CheckpointRequest,
    ConfigUpdated,
    Histograms,
    HparamsRequest,
    Metrics,
    RestoreRequest,
    RunFinished,
    RunResumed,
    RunStarted,
    StopRequest,
    SummaryUpdated,
    metric_value,
)
from leyline.payloads import STEP_RULE, Scalar, is_step
from leyline.payloads_histogram import DEFAULT_BINS
from nissa.announce import announce
from nissa.calls import CallHandler, spec_of
from nissa.checks import as_floats, check_log
from nissa.diagnostics import answer_stacks, start_watchdog
from nissa.histogram import Histogram, distributions
from nissa.hub import DeliveryReport
from nissa.metadata import RunConfig, Summary, check_direction
from nissa.run_core import RunCore
from nissa.runtime import Runtime
from nissa.settings import Settings
from nissa.stops import CheckpointHandler, Hook, StopHandler
from nissa.sweep import trial as sweep_trial
from nissa.sweep.handlers import HparamsHandler, HparamsHook, RestoreHandler, RestoreHook, Sharing
from nissa.system import start_system_metrics
from nissa.telemetry.install import install_profiling, install_rank_checks
from nissa.watch import ModelWatch

logger = logging.getLogger(__name__)

Value = float | int | torch.Tensor
_END_STATUSES: tuple[Literal["completed", "failed", "interrupted", "stopped"], ...] = (
    "completed", "failed", "interrupted", "stopped")


class Run(RunCore):
    """One run of a loop, live on a Nissa server (or logged locally only); see the module docstring."""

    def __init__(self, runtime: Runtime, settings: Settings, *, device: str, close_ranks: bool = False) -> None:
        super().__init__(runtime, close_ranks=close_ranks)
        self.settings = settings
        """What the run was started with (``nissa.init``'s arguments, checked)."""
        self.name = settings.run_name
        self._config = RunConfig(settings.config or {}, self._send_config)
        self.steps_per_epoch = settings.steps_per_epoch
        self.device = device
        sharing = Sharing(runtime.hub.config)
        self._calls, self._checkpoints, self._stops = CallHandler(), CheckpointHandler(sharing.share), StopHandler()
        self._hparams = HparamsHandler(self.config)
        self._restores = RestoreHandler(runtime.hub.config, self._hparams)
        runtime.commands.register(CallRequest, self._calls)
        runtime.commands.register(CheckpointRequest, self._checkpoints)
        runtime.commands.register(StopRequest, self._stops)
        runtime.commands.register(HparamsRequest, self._hparams)
        runtime.commands.register(RestoreRequest, self._restores)
        self.phases: tuple[str, ...] | None = None if settings.phases is None else tuple(settings.phases)
        """What a profile window of target ``update`` may record (``nissa.init(phases=…)``); None: not said."""
        self._profiles = install_profiling(runtime, device=device, phases=self.phases)
        install_rank_checks(runtime, stragglers=settings.stragglers)
        answer_stacks(runtime)  # ``stacks`` answered off the loop, from now on
        self._watchdog_s = settings.stack_watchdog_s
        self._continues = runtime.hub.stats.logged > 0
        """The run log held events already (its ``run_id`` continued): ``end`` before a start sends no
        ``run_started`` into it."""
        self._watch = ModelWatch(runtime.emit, lambda: runtime.level)
        self._step = self._epoch = self._next = 0
        """``_next``: the step the next ``run.step()`` begins (unless its ``at`` says a later one)."""
        self._stepped = self._ran = False
        """A step has begun (``run.step()``, or ``resume``): ``_step`` is the step in progress, not the 0 before one;
        ``_ran``: one began in this process (its watch has something to read at the next boundary)."""
        self._started_at = time.monotonic()
        self._started = False
        self.metadata = msgspec.structs.replace(settings.metadata, summary=dict(settings.metadata.summary))
        """Project, group, tags, notes and the metrics' directions, as ``run_started`` carries them (the settings'
        own, copied: ``define_metric`` adds to them)."""
        self.summary = Summary(self._send_summary)
        """Values of the run's summary set outright: ``run.summary["test_acc"] = 0.91`` (sent at once)."""
        self._system = settings.system(device)

    # --- what the run is ----------------------------------------------------------------------

    @property
    def current_step(self) -> int | None:
        """The step in progress, in the loop's own count: 0 at the first ``run.step()``, one more at each after it
        (or what its ``at`` said); None before the first (what is logged then is stamped 0)."""
        return self._step if self._stepped else None

    @property
    def epoch_count(self) -> int:
        """Epochs ended (``run.epoch_end()``, or every ``steps_per_epoch`` steps)."""
        return self._epoch

    @property
    def config(self) -> RunConfig:
        """The run's config (flat ``a.b`` keys): ``run_started``'s, and once the run has started what
        ``run.config.update(...)`` adds, each change sent at once (see ``nissa.metadata.RunConfig``)."""
        return self._config

    @config.setter
    def config(self, values: Mapping[str, Any]) -> None:
        if self._started:
            self._config.update(values)
        else:
            self._config = RunConfig(values, self._send_config)

    def _send_config(self, changed: dict[str, Scalar]) -> None:
        if self._started and not self.finished:  # before the start, run_started carries it
            self.runtime.emit(ConfigUpdated(config=changed))

    @property
    def should_stop(self) -> bool:
        """A ``stop`` command was applied: end the loop; ``finish`` reports the run ``stopped``."""
        return self._stops.asked is not None

    @property
    def started(self) -> bool:
        """``run_started`` went out (with the run's config): the first ``step``, ``log`` or ``start`` was made."""
        return self._started

    @property
    def takes_checkpoints(self) -> bool:
        """An ``on_checkpoint`` function is set (without one a ``checkpoint`` command is rejected)."""
        return self._checkpoints.fn is not None

    @property
    def steering(self) -> sweep_trial.Steering:
        """Which of a sweep's hooks the loop set: ``on_checkpoint``, ``on_restore``, ``on_hparams``."""
        return sweep_trial.Steering(on_checkpoint=self.takes_checkpoints, on_restore=self._restores.fn is not None,
                                    on_hparams=self._hparams.fn is not None)

    # --- before the first step ----------------------------------------------------------------

    def command(self, name: str | None = None, *,
                help: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declare a command of the run's own (before its first step); the decorated function runs at a step
        boundary with the arguments the server checked, and its return value is the command's result."""
        def declare(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._check_open("run.command")
            if self._started:
                raise RuntimeError("declare commands before the run's first step (they travel in run_started)")
            self._calls.declare(spec_of(name or fn.__name__, fn, help), fn)
            return fn
        return declare

    def on_checkpoint(self, fn: Hook) -> Hook:
        """``fn(step)`` saves a checkpoint when a ``checkpoint`` command arrives; what it returns (a path, a
        dict) is the command's result."""
        _check_hook("on_checkpoint", fn)
        self._checkpoints.fn = fn
        return fn

    def on_stop(self, fn: Hook) -> Hook:
        """``fn(step)`` runs when a ``stop`` command arrives (save what resuming needs); then ``should_stop``."""
        _check_hook("on_stop", fn)
        self._stops.fn = fn
        return fn

    def on_hparams(self, fn: HparamsHook) -> HparamsHook:
        """``fn(values)`` applies new values of the run's hyperparameters (an ``hparams`` command, a sweep's
        explore) at a step boundary; ``run.config`` takes them, and what ``fn`` returns joins the command's result.
        For a torch optimizer one line does: ``run.on_hparams(lambda v: nissa.sweep.apply_hparams(opt, v))``."""
        if not callable(fn):
            raise TypeError(f"run.on_hparams: expected a function of the values, got {type(fn).__name__}")
        self._hparams.fn = fn
        return fn

    def on_restore(self, fn: RestoreHook) -> RestoreHook:
        """``fn(path)`` loads a checkpoint another run shared (a ``restore`` command: a sweep's exploit) at a step
        boundary: the file ``on_checkpoint`` saved there, downloaded under the run's directory. The run goes on in
        the same process; the values that came with it reach ``on_hparams`` next."""
        if not callable(fn):
            raise TypeError(f"run.on_restore: expected a function of a path, got {type(fn).__name__}")
        self._restores.fn = fn
        return fn

    def watch(self, model: torch.nn.Module, name: str | None = None, every: int = 1,
              histograms: str | None = None, bins: int = DEFAULT_BINS) -> torch.nn.Module:
        """Per-layer gradient and weight statistics of ``model`` at every ``every``-th step of a debug window;
        with ``histograms`` (``"parameters"``, ``"gradients"`` or ``"all"``) also the distribution of each of
        its parameters or gradients every ``every`` steps at any level but OFF (``bins`` bins each)."""
        self._check_open("run.watch")
        self._watch.add(model, name, every, histograms, bins)
        return model

    def start(self) -> Run:
        """Send ``run_started`` (done by the first ``step``, ``log`` or ``finish`` when not called)."""
        if not self._started:
            self._started = True
            ranks = self.runtime.ranks
            self.runtime.emit(RunStarted(
                name=self.name, config=self._config.as_dict(), host=platform.node(), pid=os.getpid(),
                device=self.device,
                torch_version=str(torch.__version__), log_dir=str(self.runtime.hub.config.log_dir.resolve()),
                world_size=ranks.world_size, commands=list(self._calls.declared), project=self.metadata.project,
                group=self.metadata.group, tags=list(self.metadata.tags), notes=self.metadata.notes,
                summary=dict(self.metadata.summary),
                phases=None if self.phases is None else list(self.phases)))
            if ranks.rank == 0:
                announce(self.run_id, self.settings.stream_to, self.log_path)
            self._start_beside()
            missing = sweep_trial.missing_hooks(self.steering)
            if missing is not None:
                self.fail(RuntimeError(missing))
                raise RuntimeError(missing)
        return self

    def resume(self, resumed: RunResumed, control: Mapping[str, object]) -> Run:
        """Go on with a run from a checkpoint, instead of ``start``: the run's log is continued (``nissa.init`` with
        its ``run_id`` and ``log_dir``), ``resumed`` goes out instead of ``run_started``, and the run takes up the
        checkpoint's step and epoch, its telemetry level and its debug windows (``control``: what
        ``run.control_state()`` returned when the checkpoint was taken)."""
        self._check_open("run.resume")
        if self._started:
            raise RuntimeError(f"run.resume: run {self.run_id} has started already")
        if not isinstance(resumed, RunResumed):
            raise TypeError(f"run.resume: resumed must be a leyline.RunResumed, got {type(resumed).__name__}")
        if not isinstance(control, Mapping) or not {"level", "windows"} <= control.keys():
            raise ValueError("run.resume: control must be what run.control_state() returned (its level "
                             f"and windows), got {control!r}"[:300])
        self._started = self._stepped = True
        self._step, self._epoch = resumed.checkpoint_step, resumed.checkpoint_epoch
        self._next = resumed.checkpoint_step  # the checkpoint was taken as that step began: it is done again
        self.runtime.resume_at(resumed.checkpoint_step, resumed.checkpoint_epoch, dict(control), resumed)
        self._start_beside()
        return self

    def _start_beside(self) -> None:
        """What runs beside the loop once the run has begun (its stream with it): the stack watchdog and the
        machine's sampling."""
        self._stop_watchdog = start_watchdog(self.runtime, self._watchdog_s)
        if self._system is not None:
            self._stop_system = start_system_metrics(self.runtime, self._system)

    def define_metric(self, name: str, summary: str = "min") -> None:
        """How the metric ``name`` is best: ``min``, ``max`` or ``last`` (its summary's ``best``; without this,
        a loss or an error is minimised, an accuracy, F1 or AUC maximised, anything else its last value)."""
        self._check_open("run.define_metric")
        direction = check_direction(name, summary)
        if not self._started:
            self.metadata.summary[name] = direction
        else:
            self.runtime.emit(SummaryUpdated(directions={name: direction}))

    def _send_summary(self, payload: SummaryUpdated) -> None:
        self._check_open("run.summary")
        self.start()
        self.runtime.emit(payload)

    # --- in the loop --------------------------------------------------------------------------

    def step(self, at: int | None = None) -> contextlib.AbstractContextManager[None]:
        """A step boundary: the step just done may end an epoch (``steps_per_epoch``), debug statistics of the
        watched modules are read, and commands apply. Call it once per step, or use ``with run.step():``
        around the step's body (the boundary is where the ``with`` begins). Steps are counted as a loop counts
        them: the first is step 0, so ``for step in range(n): run.step()`` stamps what it logs with its own
        ``step``. ``at``: the step that begins, in the loop's own count, for a loop that reaches boundaries only
        now and then (a logger called every 100 steps); it only goes forward (default: the next)."""
        self._check_open("run.step")
        if at is not None and (not is_step(at) or at < self._next):
            raise ValueError(f"run.step: at must be the next step {self._next} or later, {STEP_RULE}; got {at!r}")
        self.start()
        if self._ran:
            self._watch.collect(self._step)
            self._watch.collect_histograms(self._step)
        begins = self._next if at is None else at
        if self.steps_per_epoch and self._epoch < begins // self.steps_per_epoch:
            self.epoch_end()  # at most one a boundary, however far ``at`` jumps
        self._step, self._next = begins, begins + 1
        self._stepped = self._ran = True
        self.runtime.step_boundary(self._step, self._epoch)
        return contextlib.nullcontext()

    def epoch_end(self) -> None:
        """The epoch in progress ended (called by ``step`` every ``steps_per_epoch`` steps unless that is 0)."""
        self._check_open("run.epoch_end")
        self.runtime.epoch_end(self._epoch)
        self._epoch += 1

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """A named phase of the loop (``validate``, ``update``): a profile window may record its next run."""
        self._check_open("run.phase")
        if not isinstance(name, str) or not name:
            raise ValueError(f"run.phase: name must be a non-empty string, got {name!r}")
        self._profiles.phase_begin(name)
        try:
            with torch.profiler.record_function(name):
                yield
        finally:
            self._profiles.phase_end(name)

    def log(self, values: Mapping[str, Value | Histogram], *, step: int | None = None,
            labels: Mapping[str, str] | None = None) -> None:
        """Named scalars at ``step`` (default: the current step), and distributions (``nissa.Histogram``,
        computed on their devices, one ``histogram`` event a call); never blocks. Tensors are read back together,
        in one transfer; NaN and infinities are kept. A bad name, value, ``step`` or label is a ``ValueError`` (or
        ``TypeError``) at once, naming it: a bug in the caller, never an event dropped later."""
        self._check_open("run.log")
        check_log(values, step, labels)
        self.start()
        at = self._step if step is None else int(step)
        histograms = [(k, v) for k, v in values.items() if isinstance(v, Histogram)]
        if histograms:
            values = {k: v for k, v in values.items() if not isinstance(v, Histogram)}
            self.runtime.hub.emit(Histograms(histograms=distributions(histograms, self._watch.segments),
                                             labels=dict(labels or {})),
                                  step=at, epoch=self._epoch)
        if not values:
            return
        floats = as_floats(values)
        payload = Metrics(values={k: metric_value(v) for k, v in floats.items()}, labels=dict(labels or {}))
        self.runtime.hub.emit(payload, step=at, epoch=self._epoch)

    def text(self, tag: str, text: str, *, step: int | None = None) -> None:
        """Text at ``step`` (default: the current step) under ``tag``, shown as written in the run's events (a
        ``text`` event; TensorBoard's ``add_text``). A tag that is not a metric name, or text over 16384
        characters, is a ``ValueError``."""
        from leyline.metrics import MAX_TEXT_CHARS, TextLogged

        self._check_open("run.text")
        check_log({tag: 0.0}, step, None)
        if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"run.text: text must be a string of at most {MAX_TEXT_CHARS} characters")
        self.start()
        self.runtime.hub.emit(TextLogged(tag=tag, text=text), step=self._step if step is None else int(step),
                              epoch=self._epoch)

    # --- the end ------------------------------------------------------------------------------

    def finish(self, status: str | None = None, *, error: str | None = None, timeout: float = 10.0) -> DeliveryReport:
        """End the run (``completed``, or ``stopped`` after a ``stop`` command) and deliver what is left within
        ``timeout``; the report says what reached the server. A second call returns the first's report."""
        if self._report is not None:
            return self._report
        if status not in (None, *_END_STATUSES):
            raise ValueError(f"run.finish: status must be one of {list(_END_STATUSES)}, got {status!r}")
        end = next((s for s in _END_STATUSES if s == status), "stopped" if self.should_stop else "completed")
        return self.end(RunFinished(status=end, duration_s=time.monotonic() - self._started_at, error=error),
                        timeout=timeout)

    def end(self, summary: RunFinished, *, timeout: float = 10.0) -> DeliveryReport:
        """``finish`` with the loop's own ``run_finished`` (its own duration; what it achieved goes in its summaries,
        ``run.summary``, before). The watchdog and
        the machine's sampling stop, open windows close, and what is left is delivered within ``timeout``."""
        if self._report is not None:
            return self._report
        if not self._continues:  # a fresh log begins with run_started, even a run that failed before its start
            self.start()
        self._started = True
        self._stop_watchdog()
        self._stop_system()
        self._report = self.runtime.finish(summary, timeout=timeout)
        if self._close_ranks:
            self.runtime.ranks.close()
        return self._report

    def __enter__(self) -> Run:
        """``with run:`` starts the run and finishes it at the end: ``completed`` (or ``stopped``), ``interrupted``
        on Ctrl-C, ``failed`` with the exception's message otherwise."""
        self._check_open("with run")
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        if err is None:
            self.finish()
        else:
            self.fail(err)

    def fail(self, err: BaseException, *, timeout: float = 10.0) -> DeliveryReport:
        """End the run for ``err``: ``interrupted`` on Ctrl-C, ``failed`` with the exception's type and message
        otherwise (``finish`` with that status)."""
        if isinstance(err, KeyboardInterrupt):
            return self.finish("interrupted", timeout=timeout)
        return self.finish("failed", error=f"{type(err).__name__}: {err}"[:2000], timeout=timeout)


def _check_hook(what: str, fn: object) -> None:
    if not callable(fn):
        raise TypeError(f"run.{what}: expected a function of the step, got {type(fn).__name__}")
