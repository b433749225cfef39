"""``torch.compile`` with its own regions per compiled function, on the torch versions that have them.

A compiled function gets regions of its own (``isolate_recompiles``) and a name where ``torch.compile``
takes them (the pinned torch does). An older torch keeps Dynamo's compiled entries per code object, shared
by every function compiled from it: there, the process's recompile limit is raised so that the shapes a run
compiles fit under it, instead of passing it and silently running eager.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

SHARED_LIMIT = 64
"""Recompiles per code object allowed where regions cannot be isolated (three block shapes, train and eval,
two batch sizes each, for every compiled function that shares the code)."""


@functools.cache
def _isolates() -> bool:
    return "isolate_recompiles" in inspect.signature(torch.compile).parameters


def compiled(fn: Callable[..., Any], *, mode: str | None, name: str) -> Callable[..., Any]:
    """``fn`` compiled as one full graph (a graph break is an error), in regions of its own."""
    if _isolates():  # torch's stubs: compile's overloads omit the isolate_recompiles it takes
        return torch.compile(fn, mode=mode, fullgraph=True, isolate_recompiles=True,  # type: ignore[call-overload]
                             name=name)
    config = torch._dynamo.config
    for limit in ("recompile_limit", "cache_size_limit"):  # its name before and after torch 2.6
        if hasattr(config, limit):
            setattr(config, limit, max(getattr(config, limit), SHARED_LIMIT))
    return torch.compile(fn, mode=mode, fullgraph=True)
