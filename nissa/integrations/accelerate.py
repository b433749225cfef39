"""``NissaTracker``: a Nissa run as one of Hugging Face Accelerate's trackers.

    from nissa.integrations.accelerate import NissaTracker
    accelerator = Accelerator(log_with=NissaTracker("my-run", server=URL))
    accelerator.init_trackers("my-project", config={"lr": 3e-4})  # the run's project (unless project= given)
    ...
    accelerator.log({"loss": loss}, step=step)
    accelerator.end_training()

The run starts with ``init_trackers`` on every process (under torchrun each is a rank of one run; ``nissa.init``
joins the process group Accelerate made); its config is what ``init_trackers`` is given (``config``), sent
with ``run_started`` at the first ``log``. ``accelerator.log`` (the main process only) sends ``metrics`` at its
``step``. In a run of one process, a ``log`` at a new ``step`` is also a step boundary, where commands apply
(``tracker.run.should_stop`` after a ``stop``; ``tracker.run.on_checkpoint(fn)`` takes ``checkpoint``); with
several processes every rank calls ``tracker.run.step()`` at its steps itself, since only the main one logs.
``end_training`` finishes the run; a loop that raises never gets there, and the run ends as ``failed``
with the error when that exception ends the process (``nissa.integrations.uncaught``).

A ``GeneralTracker`` by Accelerate's public tracker interface (pinned in constraints.txt, tested with a real
``Accelerator``).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from accelerate.tracking import GeneralTracker

from nissa.integrations.names import scalars
from nissa.integrations.steps import boundary_at
from nissa.integrations.uncaught import finish_on_uncaught
from nissa.run import Run

logger = logging.getLogger(__name__)


def _project_of_init_trackers() -> str | None:
    """The ``project_name`` of the ``Accelerator.init_trackers`` call starting this tracker. Accelerate hands
    it only to the trackers it builds from a name, never to one the loop built (``log_with=NissaTracker(…)``):
    read from that call's arguments (the pinned version's; a test holds it)."""
    from accelerate import Accelerator

    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code.co_name == "init_trackers" and isinstance(frame.f_locals.get("self"), Accelerator):
            name = frame.f_locals.get("project_name")
            return name if isinstance(name, str) and name else None
        frame = frame.f_back
    logger.debug("NissaTracker: started outside Accelerator.init_trackers; no project from it")
    return None


class NissaTracker(GeneralTracker):
    """See the module docstring. ``run``: report into this run (not finished by ``end_training``); otherwise
    ``init_args`` go to ``nissa.init`` at ``init_trackers`` (``server``, ``log_dir``, ``token``,
    ``system_metrics`` …)."""

    name = "nissa"
    requires_logging_directory = False
    main_process_only = False  # every process is a rank of the run: nissa.init meets the others

    def __init__(self, run_name: str = "accelerate", run: Run | None = None, **init_args: Any) -> None:
        super().__init__()
        if run is not None and init_args:
            raise TypeError(f"NissaTracker: give a run or nissa.init's arguments, not both ({sorted(init_args)})")
        self.run_name = run_name
        self._run = run
        self._owned = run is None
        self._init_args = init_args

    @property
    def tracker(self) -> Run:
        """The ``nissa.Run`` (after ``init_trackers``)."""
        return self.run

    @property
    def run(self) -> Run:
        if self._run is None:
            raise RuntimeError("NissaTracker: the run starts with accelerator.init_trackers(...)")
        return self._run

    def start(self) -> None:
        if self._run is None:
            import nissa

            project = self._init_args.get("project") or _project_of_init_trackers()
            self._run = nissa.init(run_name=self.run_name, **{**self._init_args, "project": project})
            finish_on_uncaught(self._run)  # a loop that raises never reaches end_training: the run ends as failed

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        self.run.config.update(values)  # after the start too: the run's config grows (a config event)

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        run = self.run
        if run.finished:
            return
        boundary_at(run, step)  # a new step of a one-process run: a boundary, where commands apply
        numbers = scalars(values)
        if numbers:
            run.log(numbers, step=step)

    def finish(self) -> None:
        if self._run is not None and self._owned:
            self._run.finish()
