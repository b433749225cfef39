"""bench/series.py still runs end to end (tiny size) and ends with its ``key=value`` line."""

from __future__ import annotations

import pytest

from .test_benchmarks import _run_bench


@pytest.mark.timeout(120)
def test_series_benchmark_compares_with_the_raw_read():
    figures = _run_bench("bench/series.py", "--events", "5000", "--points", "200", "--repeats", "1",
                         "--backends", "sqlite")
    assert figures["events"] == 5000 and figures["points"] == 200
    assert figures["series_ms_1m"] > 0 and figures["raw_read_ms"] > 0
    assert figures["ratio"] == pytest.approx(figures["series_ms_1m"] / figures["raw_read_ms"], rel=0.05, abs=0.01)
    assert figures["series_cpu_us_per_event"] > 0 and figures["store_cpu_us_per_event"] > 0  # measured, not compared
