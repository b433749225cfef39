"""Text helpers: numbers, sparklines, one line per event kind, the log filter."""

import pytest

from leyline import KIND_NAMES, KINDS, Heartbeat, Severity, make_event
from leyline.samples import sample_events
from tui.format import SHORT_KIND, LogFilter, LogLine, describe, num, sparkline


def test_num_says_not_measured_instead_of_zero():
    assert num(None) == "—"
    assert num(0.0) == "0.000"
    assert num(float("nan")) == "nan"
    assert num(0.00001, 3) == "1.00e-05"
    assert num(12345.0) == "1.23e+04"


def test_sparkline_scales_to_its_own_range_and_keeps_gaps():
    assert sparkline([0, 1, 2, 3, 4, 5, 6], 7) == "▁▂▃▄▅▆▇"
    assert sparkline([1.0, None, 3.0], 3) == "▁ ▇"
    assert sparkline([5.0, 5.0], 2) == "▄▄"
    assert sparkline([1, 2, 3, 4], 2) == "▁▇"  # only the last ``width`` values
    assert "█" not in sparkline(list(range(100)), 100)  # rows of sparklines never touch in a browser
    assert sparkline([], 4) == ""
    assert sparkline([None, None], 2) == "  "


def test_every_kind_has_a_description_and_a_short_label():
    assert set(SHORT_KIND) == set(KINDS)
    for event in sample_events():
        text = describe(event)
        assert text and text != event.kind.value, event.kind
        assert LogLine.of(event).plain.endswith(text)


def _line(kind_event):
    return LogLine.of(kind_event)


@pytest.mark.parametrize(
    ("terms", "expected_kinds"),
    [
        ("kind:ppo", {"ppo_update"}),
        ("kind:seed_pr", {"seed_pruned"}),
        ("sev:warning", {"anomaly_detected", "events_dropped", "alert"}),
        ("kl_spike", {"anomaly_detected"}),
        ("kind:seed !pruned !fossilized !germinated !gate", {"seed_stage_changed"}),
        ("", set(KIND_NAMES)),
    ],
)
def test_log_filter_terms(terms, expected_kinds):
    lines = [LogLine.of(e) for e in sample_events()]
    got = {line.kind.value for line in lines if LogFilter(terms).matches(line)}
    assert got == expected_kinds


def test_env_filter_matches_only_that_env():
    a = make_event(Heartbeat(uptime_s=1), run_id="r", seq=1, ts=0, env=2)
    b = make_event(Heartbeat(uptime_s=1), run_id="r", seq=2, ts=0, env=12)
    f = LogFilter("env:2")
    assert f.matches(LogLine.of(a)) and not f.matches(LogLine.of(b))
    assert LogLine.of(a).severity is Severity.DEBUG


def test_tick_labels_have_the_digits_that_tell_neighbours_apart():
    from tui.format import tick_labels

    assert tick_labels([4.0365, 4.0370, 4.0375]) == ["4.0365", "4.0370", "4.0375"]
    assert tick_labels([0, 0.0002, 0.0004, 0.001]) == ["0", "2e-4", "4e-4", "1e-3"]  # shorter than 0.0002
    assert tick_labels([0, 0.25, 0.5]) == ["0", "0.25", "0.50"]
    assert tick_labels([0, 1000, 2000]) == ["0", "1k", "2k"] and tick_labels([3000, 3200]) == ["3000", "3200"]
    assert tick_labels([32_000, 34_000]) == ["32k", "34k"] and tick_labels([0, 10, 20]) == ["0", "10", "20"]
    assert tick_labels([1e-4, 1e-3, 0.01, 0.1, 1]) == ["1e-4", "1e-3", "0.01", "0.1", "1"]  # a log scale
    assert tick_labels([0.1 + 0.2, 0.4]) == ["0.3", "0.4"]
