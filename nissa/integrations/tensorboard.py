"""``SummaryWriter``: ``torch.utils.tensorboard.SummaryWriter``'s calls, into a Nissa run.

    from nissa.integrations.tensorboard import SummaryWriter   # was: from torch.utils.tensorboard import …
    writer = SummaryWriter("runs/exp1", server="http://127.0.0.1:8765")
    writer.add_scalar("loss", loss, step)
    writer.close()

One writer is one run, named after the last part of ``log_dir`` (TensorBoard's default name when none is given); the
other keyword arguments go to ``nissa.init`` (``server``, ``token``, ``system_metrics`` …; the run's own log goes
under ``nissa_log_dir``), or ``run=`` reports into a run of yours. ``add_scalar`` is a series of the tag's name;
``add_scalars("loss", {"train": …, "val": …})`` one series ``loss`` with a label ``tag`` per key (two lines of one
chart, as TensorBoard draws them); ``add_histogram`` a distribution (``nissa.Histogram``: ``DEFAULT_BINS`` bins of
equal width from min to max unless ``bins`` is a number); ``add_hparams`` the run's config (before its first value)
and its metrics; ``add_text`` a ``text`` event. Other ``SummaryWriter`` methods (images, graphs, embeddings …) are
accepted and not recorded (one log line each); ``walltime`` is TensorBoard's: each value takes the run's own time.
In a run of one process, a ``global_step`` past the run's step is a step boundary, where commands apply
(``writer.run.should_stop`` after a ``stop``).
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

from leyline.payloads_histogram import DEFAULT_BINS
from nissa.integrations.names import metric_name, scalars
from nissa.integrations.steps import boundary_at
from nissa.run import Run

logger = logging.getLogger(__name__)

__all__ = ["SummaryWriter"]


class SummaryWriter:
    """See the module docstring."""

    def __init__(self, log_dir: str | pathlib.Path | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "", *, run: Run | None = None,
                 run_name: str | None = None, nissa_log_dir: str | pathlib.Path = "nissa-runs",
                 **init_args: Any) -> None:
        if run is not None and init_args:
            raise TypeError(f"SummaryWriter: give a run or nissa.init's arguments, not both ({sorted(init_args)})")
        self._owned = run is None
        if run is None:
            import nissa

            name = run_name or (pathlib.Path(log_dir).name if log_dir else f"tensorboard{comment}")
            run = nissa.init(run_name=name or "tensorboard", log_dir=nissa_log_dir, **init_args)
        self.run = run
        self.log_dir = str(log_dir) if log_dir is not None else None
        self._ignored: set[str] = set()

    # --- what TensorBoard loops call -----------------------------------------------------------------

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None, walltime: float | None = None,
                   new_style: bool = False, double_precision: bool = False) -> None:
        self._log({tag: scalar_value}, global_step)

    def add_scalars(self, main_tag: str, tag_scalar_dict: Mapping[str, Any], global_step: int | None = None,
                    walltime: float | None = None) -> None:
        name = metric_name(main_tag)
        for tag, value in tag_scalar_dict.items():
            self._log({name: value}, global_step, labels={"tag": str(tag)[:128]})

    def add_histogram(self, tag: str, values: Any, global_step: int | None = None, bins: str = "tensorflow",
                      walltime: float | None = None, max_bins: int | None = None) -> None:
        if self.run.finished:
            return
        from nissa.histogram import Histogram

        count = bins if isinstance(bins, int) and not isinstance(bins, bool) else (max_bins or DEFAULT_BINS)
        boundary_at(self.run, global_step)
        self.run.log({metric_name(tag): Histogram(values, bins=max(1, min(count, 512)))},
                     step=None if global_step is None else int(global_step))

    def add_hparams(self, hparam_dict: Mapping[str, Any], metric_dict: Mapping[str, Any],
                    hparam_domain_discrete: Mapping[str, list] | None = None, run_name: str | None = None,
                    global_step: int | None = None) -> None:
        self.run.config.update(hparam_dict)  # after the start too: the run's config grows (a config event)
        self._log(dict(metric_dict), global_step)

    def add_text(self, tag: str, text_string: str, global_step: int | None = None,
                 walltime: float | None = None) -> None:
        if self.run.finished:
            return
        boundary_at(self.run, global_step)
        self.run.text(metric_name(tag), str(text_string)[:16_384], step=global_step)

    def flush(self) -> None:
        """Everything written so far reaches the run's log (and the server, within a few seconds)."""
        if not self.run.finished:
            self.run.runtime.hub.flush(5.0, delivered=False)

    def close(self) -> None:
        """Finish the run (one handed in with ``run=`` stays open)."""
        if self._owned:
            self.run.finish()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Callable[..., None]:
        if not name.startswith("add_"):
            raise AttributeError(f"'SummaryWriter' object has no attribute {name!r}")

        def ignored(*args: Any, **kwargs: Any) -> None:
            if name not in self._ignored:
                self._ignored.add(name)
                logger.info("SummaryWriter.%s is not recorded by Nissa (scalars, histograms, hparams and text are)",
                            name)
        return ignored

    # --- into the run --------------------------------------------------------------------------------

    def _log(self, values: Mapping[str, Any], global_step: int | None, labels: dict[str, str] | None = None) -> None:
        if self.run.finished:
            return
        numbers = scalars(values)
        if not numbers:
            return
        boundary_at(self.run, global_step)
        self.run.log(numbers, step=None if global_step is None else int(global_step), labels=labels)

