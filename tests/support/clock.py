"""A clock a test moves by hand: code that compares times takes it instead of reading the machine's, so a
test on a busy machine advances it rather than sleeping and hoping."""

from __future__ import annotations


class ManualClock:
    """Callable like ``time.monotonic``; stands still until ``advance``."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
