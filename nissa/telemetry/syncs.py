"""Counting host synchronizations on any device, CPU included: ``HostSyncCounter``.

On a GPU run, reading a device tensor on the host (``.item()``, ``.tolist()``, ``.cpu()``,
``float(t)``, ``if t:``, ``.numpy()``, printing it, a data-dependent shape such as
``nonzero`` or a boolean mask) blocks the host until the device has caught up, and so does
a blocking copy to the device (``.to(device)`` without ``non_blocking=True``,
``torch.tensor(values, device=device)``: torch synchronizes the stream after it). On CPU the
same reads cost nothing, so a loop can grow syncs unnoticed until someone runs it on a GPU.
``torch.cuda.set_sync_debug_mode("warn")`` finds them on a GPU; this counter finds them
everywhere, as a ``TorchFunctionMode`` that sees every tensor call the loop makes.

What counts is decided by where a tensor *would* live on a GPU run, following the split the
loop makes explicit (see ``trainer.simic.runtime``): a tensor is on the host when it was
made with no device argument (from Python values: rewards, masks, stage codes) or with the
string ``"cpu"``, by a read back (``.cpu()``), or computed from host tensors only; everything
else lives on the run's device (anything made with ``device=`` the run's device or moved
there, parameters, gradients, data, and whatever is computed from any of them). A read counts
when its tensor lives on the device.

A CPU run cannot tell a host tensor's ``.to(t.device)`` from an upload by the device alone:
there a host tensor's ``.to(d)`` uploads only when ``d`` is the very ``torch.device`` object
the counter was given (``runtime.device``, what the loop passes when it uploads). And where a
move between host and device hands the same tensor back (on a CPU run), the counter returns
a copy, so that the original stays where it was, as it would on a GPU.

It is a diagnostic: every tensor call pays a Python hook while it is active.
"""

from __future__ import annotations

import warnings
import weakref
from collections import Counter
from types import TracebackType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

# Calls that bring a tensor's value (or a value-dependent shape) to the host.
_READS = frozenset({
    "item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__", "__complex__",
    "__format__", "__repr__", "__array__", "equal", "allclose", "nonzero", "argwhere", "masked_select",
    "unique", "unique_consecutive",
})
_FACTORIES = frozenset({
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "rand", "randn", "randint",
    "randperm", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
})


def _tensors(args: Any, kwargs: dict[str, Any] | None) -> list[torch.Tensor]:
    """The tensors among the arguments (and inside list or tuple arguments, one level down)."""
    found: list[torch.Tensor] = []
    for value in (*args, *(kwargs or {}).values()) if isinstance(args, tuple) else (args,):
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found


def _non_blocking(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if kwargs.get("non_blocking"):
        return True
    return any(isinstance(a, bool) and a for a in args[1:])


def _target_device(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | str | None:
    """The device a ``Tensor.to`` call moves to (None: dtype or memory format only)."""
    for value in (*args[1:2], kwargs.get("device")):
        if isinstance(value, (str, torch.device)):
            return value
        if isinstance(value, torch.Tensor):
            return value.device
    return None


class HostSyncCounter(TorchFunctionMode):
    """Counts device→host syncs a GPU run would make; ``with HostSyncCounter(device) as c: ...``.

    ``count`` is the total, ``by_call`` the count per call name (``item``, ``tolist``, ...).
    """

    def __init__(self, device: torch.device | str) -> None:
        super().__init__()
        self.device = torch.device(device)
        self.count = 0
        self.by_call: Counter[str] = Counter()
        # Host tensors by identity (a WeakSet would compare tensors by value).
        self._host: dict[int, weakref.ref[torch.Tensor]] = {}

    def on_device(self, t: torch.Tensor) -> bool:
        """Whether ``t`` lives on the run's device (see the module docstring)."""
        ref = self._host.get(id(t))
        return ref is None or ref() is not t

    def _mark(self, t: torch.Tensor, host: bool) -> None:
        if host:
            if len(self._host) > 100_000:  # drop the dead ones now and then
                self._host = {k: r for k, r in self._host.items() if r() is not None}
            self._host[id(t)] = weakref.ref(t)
        else:
            self._host.pop(id(t), None)

    def _same_device(self, device: torch.device | str) -> bool:
        """Whether ``device`` names the run's device; the *string* ``"cpu"`` always names the host
        (torch's own host-side state is made with ``device="cpu"``, e.g. Adam's step counts)."""
        if isinstance(device, str):
            if torch.device(device).type == "cpu":
                return False
            device = torch.device(device)
        return device.type == self.device.type and (device.index is None or self.device.index is None
                                                    or device.index == self.device.index)

    def _moves_to_device(self, target: torch.device | str) -> bool:
        """Whether ``.to(target)`` moves to the run's device. On a CPU run a host tensor's
        ``.to(t.device)`` stays on the host: only the run's own device object (``runtime.device``,
        what the loop passes when it uploads) names the device there."""
        if self.device.type == "cpu" and isinstance(target, torch.device):
            return target is self.device
        return self._same_device(target)

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        inputs = _tensors(args, kwargs)
        read = self._reads(name, args, kwargs, inputs)
        if read:
            self.count += 1
            self.by_call[name] += 1
        result = func(*args, **kwargs)
        if name != "copy_":  # a copy keeps its destination where it is
            host = self._result_on_host(name, args, kwargs, inputs)
            if name in ("cpu", "to") and result is args[0] and host == self.on_device(result):
                # Between host and device a GPU run makes a new tensor; on a CPU run torch hands the
                # same one back. A copy keeps the original where it was, as on a GPU.
                result = result.clone()
            for out in _tensors(result, None):
                self._mark(out, host)
        return result

    def _reads(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], inputs: list[torch.Tensor]) -> bool:
        """Whether this call makes the host wait for the device: a read of a device tensor, or a
        blocking upload of a host one."""
        if name in ("tensor", "as_tensor"):  # Python values copied to the device
            device = kwargs.get("device")
            return device is not None and self._same_device(device)
        if not inputs:
            return False
        source = inputs[0]
        if name == "copy_":  # host_buffer.copy_(device_tensor), or a blocking upload
            if len(inputs) < 2 or self.on_device(source) == self.on_device(inputs[1]):
                return False
            return self.on_device(inputs[1]) or not _non_blocking(args, kwargs)
        if name in ("to", "cuda") and not self.on_device(source):
            target = _target_device(args, kwargs) if name == "to" else "cuda"
            return target is not None and self._moves_to_device(target) and not _non_blocking(args, kwargs)
        if not self.on_device(source):
            return False
        if name == "to":
            target = _target_device(args, kwargs)
            return target is not None and not self._same_device(target)
        if name == "__getitem__":  # a boolean mask's result shape depends on the values
            return any(t.dtype == torch.bool for t in inputs[1:])
        return name in _READS

    def _result_on_host(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                        inputs: list[torch.Tensor]) -> bool:
        if name in ("cpu", "numpy"):
            return True
        if name == "cuda":
            return False
        target = _target_device(args, kwargs) if name == "to" else None
        if target is not None:
            uploads = bool(inputs) and not self.on_device(inputs[0])
            return not (self._moves_to_device(target) if uploads else self._same_device(target))
        device = kwargs.get("device")
        if name in _FACTORIES and (device is not None or not name.endswith("_like")):
            return device is None or not self._same_device(device)
        return not any(self.on_device(t) for t in inputs)


class CudaSyncCounter:
    """The syncs ``torch.cuda.set_sync_debug_mode("warn")`` reports, counted (CUDA only): the
    ground truth the CPU count stands in for. ``with CudaSyncCounter() as c: ...``."""

    def __init__(self) -> None:
        self._caught: list[warnings.WarningMessage] = []
        self._catch = warnings.catch_warnings(record=True)
        self.by_call: Counter[str] = Counter()

    @property
    def count(self) -> int:
        return sum(1 for w in self._caught if "synchroniz" in str(w.message).lower())

    def __enter__(self) -> CudaSyncCounter:
        self._caught = self._catch.__enter__()
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        torch.cuda.set_sync_debug_mode("default")
        self.by_call["cuda"] = self.count
        self._catch.__exit__(exc_type, exc, tb)
