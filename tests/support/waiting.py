"""Wait for a condition with a deadline instead of sleeping a fixed time (robust on a loaded machine)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.05,
             message: str = "condition") -> T:
    """Call ``predicate`` until it returns something truthy; return it, or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {message}")
        time.sleep(interval)


async def async_wait_for(predicate: Callable[[], Awaitable[T] | T], timeout: float = 30.0,
                         interval: float = 0.05, message: str = "condition") -> T:
    """``wait_for`` for async tests; ``predicate`` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {message}")
        await asyncio.sleep(interval)
