"""A run's metadata: its config as ``run_started`` carries it (``flat_config``), where the run belongs (project,
group, tags, notes) and how its results read (a metric's direction, values of its summary set outright). Checked
here against the contract's own types (``leyline.summaries``), so a mistake is a ``ValueError`` naming the argument
at once."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

import msgspec

from leyline.metrics import SummaryUpdated, metric_value
from leyline.payloads import Scalar
from leyline.summaries import DIRECTIONS, Direction, Directions, Notes, Project, Tags


class RunMetadata(msgspec.Struct, kw_only=True):
    """``nissa.init``'s ``project``, ``group``, ``tags``, ``notes`` and ``summary``, checked."""

    project: Project = ""
    group: Project = ""
    tags: Tags = []
    notes: Notes = ""
    summary: Directions = {}


def run_metadata(caller: str = "nissa.init", **given: Any) -> RunMetadata:
    """The arguments as the contract takes them; a ``ValueError`` naming the one that is wrong."""
    fields = {k: (list(v) if k == "tags" and isinstance(v, (tuple, list)) else v) for k, v in given.items()
              if v is not None}
    if isinstance(fields.get("tags"), str):
        raise TypeError(f"{caller}: tags must be a list of strings, got a string ({fields['tags']!r})")
    try:
        return msgspec.convert(fields, RunMetadata)
    except msgspec.ValidationError as err:
        raise ValueError(f"{caller}: {_validation_message(err)} (a project, group or tag: letters, digits, "
                         f"_ . : + / = @ -, no blank; a direction: {', '.join(DIRECTIONS)})") from None


def _validation_message(err: msgspec.ValidationError) -> str:
    text = str(err)
    head, _, where = text.rpartition(" - at `$.")
    return f"{where.rstrip('`')}: {head}" if where else text


def check_direction(name: object, summary: object) -> Direction:
    """``run.define_metric``'s arguments: a metric's name, and ``min``, ``max`` or ``last`` (returned)."""
    from nissa.checks import check_log

    if not isinstance(name, str):
        raise TypeError(f"run.define_metric: name must be a string, got {type(name).__name__}")
    check_log({name: 0.0}, None, None)
    for direction in DIRECTIONS:
        if summary == direction:
            return direction
    raise ValueError(f"run.define_metric: summary must be one of {list(DIRECTIONS)}, got {summary!r}")


class RunConfig(MutableMapping[str, Scalar]):
    """``run.config``: the run's config, flat (``opt.lr``). Before the run starts it is what ``run_started``
    carries; after, what changes in it (``run.config.update(lr=…)``, ``run.config["lr"] = …``, TensorBoard's
    ``add_hparams``) is sent at once (a ``config`` event) and the server's copy of the run's config grows with
    it: a later entry is filterable like the first ones (``config.lr>=0.01``). Nested mappings are flattened."""

    def __init__(self, values: Mapping[str, Any], send: Callable[[dict[str, Scalar]], None]) -> None:
        self._values = flat_config(values)
        self._send = send

    def update(self, other: Any = (), /, **more: Any) -> None:  # dict.update's forms, one event for all
        given = dict(other.items() if isinstance(other, Mapping) else other)
        flat = flat_config({**given, **more})
        changed = {k: v for k, v in flat.items() if k not in self._values or self._values[k] != v}
        self._values.update(flat)
        if changed:
            self._send(changed)

    def __setitem__(self, name: str, value: Any) -> None:
        self.update({name: value})

    def __delitem__(self, name: str) -> None:
        del self._values[name]  # before the start only: the server keeps what it was sent

    def __getitem__(self, name: str) -> Scalar:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return repr(self._values)

    def as_dict(self) -> dict[str, Scalar]:
        return dict(self._values)


class Summary(MutableMapping[str, float]):
    """``run.summary``: values of the run's summary set outright (``run.summary["test_acc"] = 0.91``), each sent
    at once as the series' last and best. Reading gives what was set here."""

    def __init__(self, send: Callable[[SummaryUpdated], None]) -> None:
        self._send = send
        self._values: dict[str, float] = {}

    def __setitem__(self, name: str, value: float) -> None:
        from nissa.checks import check_log

        if isinstance(value, bool) or not isinstance(value, numbers.Real) and not hasattr(value, "item"):
            raise TypeError(f"run.summary[{name!r}]: expected a number, got {type(value).__name__}")
        check_log({name: value}, None, None)
        number = float(value.item() if hasattr(value, "item") else value)  # a tensor or NumPy scalar
        self._values[name] = number
        self._send(SummaryUpdated(values={name: metric_value(number)}))

    def __getitem__(self, name: str) -> float:
        return self._values[name]

    def __delitem__(self, name: str) -> None:
        raise TypeError("run.summary: a value set cannot be taken back (set another)")

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, str | int | float | bool | None]:
    """A config as ``run_started`` carries it: nested mappings flattened to ``a.b`` keys, numbers
    (NumPy's too) as numbers, other values as text."""
    out: dict[str, str | int | float | bool | None] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_config(value, f"{name}."))
        elif value is None or isinstance(value, (str, int, float, bool)):
            out[name] = value
        elif isinstance(value, numbers.Integral):  # NumPy's: shown as the number, not as np.int64(32)
            out[name] = int(value)
        elif isinstance(value, numbers.Real):
            out[name] = float(value)
        else:
            out[name] = repr(value)
    return out
