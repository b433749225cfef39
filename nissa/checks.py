"""What ``nissa.init`` and ``run.log`` accept: a caller's mistake is a ``ValueError`` or ``TypeError`` at once,
naming the argument (or the metric) that is wrong, never an event the hub refuses later and drops."""

from __future__ import annotations

import numbers
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

import msgspec

from leyline.calls import Phases
from leyline.metrics import MAX_LABELS, MAX_METRIC_NAME_CHARS, MAX_METRICS, METRIC_NAME_PATTERN
from leyline.payloads import MAX_STEP, STEP_RULE
from nissa.hub.config import check_servers

if TYPE_CHECKING:
    import torch

_NAME = re.compile(METRIC_NAME_PATTERN)
_NAME_RULE = "a letter or _ first, then letters, digits, _ . / : -; at most 128 characters"


def check_server(server: object, source: str, caller: str = "nissa.init") -> None:
    """``server`` (or ``$NISSA_SERVER``, as ``source`` says): one URL or several, comma-separated."""
    if not isinstance(server, str):
        raise TypeError(f"{caller}: {source} must be a URL string like 'http://127.0.0.1:8765', "
                        f"got {type(server).__name__}")
    try:
        check_servers(server)
    except ValueError as err:  # its message names the CLI's flag; here the argument is meant
        raise ValueError(f"{caller}: {source}{str(err).removeprefix('--server')}") from None


def check_init(*, run_name: object, config: object, steps_per_epoch: object, device: object,
               stack_watchdog_s: object, rank_timeout_s: object, phases: object = None, envs_per_rank: object = 0,
               stragglers: object = None, agree: object = True) -> None:
    """The arguments of ``nissa.init`` the hub does not check itself."""
    from nissa.telemetry.stragglers import StragglerConfig

    if not isinstance(run_name, str) or not run_name.strip():
        raise ValueError(f"nissa.init: run_name must be a non-empty string, got {run_name!r}")
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"nissa.init: config must be a mapping (a dict of names to values), "
                        f"got {type(config).__name__}")
    if not _is_int(steps_per_epoch) or steps_per_epoch < 0:
        raise ValueError(f"nissa.init: steps_per_epoch must be an int >= 0 (0: the loop calls run.epoch_end()), "
                         f"got {steps_per_epoch!r}")
    if not _is_number(stack_watchdog_s) or not 0 <= stack_watchdog_s < float("inf"):
        raise ValueError(f"nissa.init: stack_watchdog_s must be seconds >= 0 (0: off), got {stack_watchdog_s!r}")
    if not _is_number(rank_timeout_s) or not 0 < rank_timeout_s < float("inf"):
        raise ValueError(f"nissa.init: rank_timeout_s must be seconds > 0, got {rank_timeout_s!r}")
    check_device(device)
    if not _is_int(envs_per_rank) or envs_per_rank < 0:
        raise ValueError(f"nissa.init: envs_per_rank must be an int >= 0 (0: env ids as given), got {envs_per_rank!r}")
    if not isinstance(agree, bool):
        raise TypeError(f"nissa.init: agree must be True or False, got {agree!r}")
    if stragglers is not None and not isinstance(stragglers, StragglerConfig):
        raise TypeError(f"nissa.init: stragglers must be a nissa.StragglerConfig, got {type(stragglers).__name__}")
    if phases is not None:
        try:
            msgspec.convert(list(phases) if isinstance(phases, (list, tuple)) else phases, Phases)
        except msgspec.ValidationError as err:
            raise ValueError(f"nissa.init: phases must be a list of phase names (lower case, digits and '_', a "
                             f"letter first), got {phases!r}: {err}") from None


def check_device(device: object) -> None:
    """``auto``, or a device torch knows (``cpu``, ``cuda``, ``cuda:N``…), a CUDA one only where CUDA is available."""
    if not isinstance(device, str):
        raise TypeError(f"nissa.init: device must be a string like 'cpu' or 'cuda:0', got {type(device).__name__}")
    if device == "auto":  # CUDA where there is one (the process group's backend follows)
        return
    import torch  # here, not at the top: the query API and the shell's ``nissa runs`` check a server, not a device

    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise ValueError(f"nissa.init: device {device!r} is neither auto nor a torch device (cpu, cuda, "
                         f"cuda:N, …)") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"nissa.init: device {device!r}, but this torch sees no CUDA device "
                         f"(torch.cuda.is_available() is False)")


def resolved_device(device: str) -> str:
    """The device a checked ``device`` names: ``auto`` is ``cuda`` where torch sees a CUDA device, else ``cpu``."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_log(values: object, step: object, labels: object) -> None:
    """What ``run.log`` takes: a mapping of metric names to numbers, an int ``step``, string labels."""
    if not isinstance(values, Mapping):
        raise TypeError(f"run.log: expected a mapping of metric names to numbers, got {type(values).__name__}")
    if len(values) > MAX_METRICS:
        raise ValueError(f"run.log: at most {MAX_METRICS} values per call, got {len(values)}")
    bad = next((k for k in values if not is_name(k)), None)
    if bad is not None:
        raise ValueError(f"run.log: bad metric name {bad!r} ({_NAME_RULE})")
    if step is not None and (not _is_int(step) or not 0 <= step <= MAX_STEP):
        raise ValueError(f"run.log: step must be {STEP_RULE}, got {step!r}")
    if labels is None:
        return
    if not isinstance(labels, Mapping):
        raise TypeError(f"run.log: labels must be a mapping of names to strings, got {type(labels).__name__}")
    if len(labels) > MAX_LABELS:
        raise ValueError(f"run.log: at most {MAX_LABELS} labels, got {len(labels)}")
    for key, value in labels.items():
        if not is_name(key):
            raise ValueError(f"run.log: bad label name {key!r} ({_NAME_RULE})")
        if not isinstance(value, str) or len(value) > MAX_METRIC_NAME_CHARS:
            raise ValueError(f"run.log: label {key!r} must be a string of at most {MAX_METRIC_NAME_CHARS} "
                             f"characters, got {value!r}")


def as_floats(values: Mapping[str, Any]) -> dict[str, float]:
    """Python and NumPy numbers as they are; tensors (one element each) read back in one transfer per device."""
    out: dict[str, float] = {}
    tensors: dict[torch.device, list[tuple[str, torch.Tensor]]] = {}
    torch_module = sys.modules.get("torch")  # a caller holds no tensor where torch was never imported
    tensor = torch_module.Tensor if torch_module is not None else ()
    for key, value in values.items():
        if isinstance(value, tensor):
            tensors.setdefault(value.device, []).append((key, _readable(key, value)))
        elif type(value) in (float, int) or _is_number(value):  # the plain types first: the common case
            try:
                out[key] = float(value)
            except OverflowError:
                raise ValueError(f"run.log: {key!r} is too large for a float") from None
        else:
            raise ValueError(f"run.log: {key!r} must be a number or a one-element tensor, got {type(value).__name__}")
    for items in tensors.values():
        assert torch_module is not None  # there are tensors
        read = torch_module.stack([t.detach().reshape(()).to(torch_module.float64) for _, t in items]).tolist()
        out.update(zip((k for k, _ in items), read, strict=True))
    return {key: out[key] for key in values}


def _readable(key: str, value: torch.Tensor) -> torch.Tensor:
    """A tensor whose one real value can be read back (not sparse, meta or complex)."""
    import torch

    if value.layout != torch.strided:
        raise ValueError(f"run.log: {key!r} must be a dense tensor, got layout {value.layout}")
    if value.device.type == "meta":
        raise ValueError(f"run.log: {key!r} is on the meta device: it holds no value to log")
    if value.numel() != 1:
        raise ValueError(f"run.log: {key!r} must be a scalar, got a tensor of shape {tuple(value.shape)}")
    if value.is_complex():
        raise ValueError(f"run.log: {key!r} is complex ({value.dtype}): log its real part or its abs()")
    return value


def is_name(key: object) -> bool:
    """A metric or label name the contract takes."""
    return isinstance(key, str) and len(key) <= MAX_METRIC_NAME_CHARS and _NAME.search(key) is not None


def _is_int(value: object) -> TypeGuard[int]:  # numpy's and torch's ints compare as an int does
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[float]:  # any real number compares as a float does
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__name__ != "bool_"
