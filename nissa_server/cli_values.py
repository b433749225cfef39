"""Types of ``nissa-server``'s numeric flags: a bad value is refused by argparse, which names the flag."""

from __future__ import annotations

import argparse
import math


def seconds(text: str) -> float:
    """A duration in seconds: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def count(text: str) -> int:
    """A whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 for any free one."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port in 0..65535 (0: any free one), got {text!r}")
    return value
