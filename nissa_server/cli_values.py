"""Types of ``nissa-server``'s numeric flags: a bad value is refused by argparse, which names the flag."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T", int, float)


def _value(text: str, cast: Callable[[str], T], accept: Callable[[T], bool], rule: str) -> T:
    try:
        value = cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}") from None
    if not accept(value):
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds: a finite number > 0."""
    return _value(text, float, lambda v: math.isfinite(v) and v > 0, "a number of seconds > 0")


def count(text: str) -> int:
    """A whole number >= 1."""
    return _value(text, int, lambda v: v >= 1, "a whole number >= 1")


def port(text: str) -> int:
    """A TCP port, 0 for any free one."""
    return _value(text, int, lambda v: 0 <= v <= 65535, "a port in 0..65535 (0: any free one)")
