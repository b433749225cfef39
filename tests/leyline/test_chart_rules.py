"""What a run's config rules out of its charts, and which config keys tell runs apart (``leyline.charts``)."""

from __future__ import annotations

from leyline import charts


def test_a_heuristic_run_has_no_ppo_charts_and_an_overlay_keeps_what_one_run_has():
    titles, why = charts.hidden_charts([{"policy": "heuristic", "lr": 0.1}])
    ppo = [c.title for c in charts.DEFAULT_CHARTS if all(n.startswith("ppo_update.") for n in c.names)]
    assert titles == ppo == ["return", "policy loss", "value loss", "KL", "entropy", "explained variance"]
    assert why == [charts.UNAVAILABLE[0].why]
    assert charts.hidden_charts([{"policy": "heuristic"}, {"policy": "ppo"}]) == ([], [])
    for configs in ([{"policy": "ppo"}], [{}], []):
        assert charts.hidden_charts(configs) == ([], [])


def test_each_reason_fits_one_console_line():
    assert all(len(rule.why) <= 98 for rule in charts.UNAVAILABLE)  # 100 columns less the note's padding
    assert charts.definition()["unavailable"] == [
        {"key": r.key, "value": r.value, "prefix": r.prefix, "why": r.why} for r in charts.UNAVAILABLE]


def test_values_differ_as_json_holds_them():
    # 1 and 1.0 are one number in JSON (and on the page); True and 1 are not.
    assert charts.differing_params([{"a": 1, "b": True}, {"a": 1.0, "b": 1}]) == ["b"]
    assert charts.differing_params([{"a": "x", "log_dir": "/1"}, {"a": "x", "log_dir": "/2"}]) == []
    assert charts.differing_params([{f"k{i}": i for i in range(9)}, {}], charts.PARAM_COLUMNS) == [
        f"k{i}" for i in range(6)]


def test_esper_charts_are_its_own_rows_each_drawing_a_series_its_events_make():
    """Esper declares its charts beside its payloads (``leyline.esper.charts``), registered in the chart list as
    its kinds are in the kinds table; each names a field of a kind's payload, and a field a payload lacks is refused
    where the chart is declared."""
    import pytest

    from leyline.chart_spec import series_of
    from leyline.esper import PPOUpdate
    from leyline.esper.charts import ESPER_CHARTS, ESPER_UNAVAILABLE
    from leyline.kinds import KIND_NAMES, KINDS
    from leyline.samples import sample_events
    from leyline.series import points_of

    assert ESPER_CHARTS in charts.CLIENT_CHARTS and set(ESPER_UNAVAILABLE) <= set(charts.UNAVAILABLE)
    assert charts.DEFAULT_CHARTS[:len(ESPER_CHARTS)] == ESPER_CHARTS
    for pattern in (pattern for chart in ESPER_CHARTS for pattern in chart.names):
        kind, field = pattern.split(".")[:2]
        assert field in KINDS[KIND_NAMES[kind]].payload.__struct_fields__, pattern
    made = {p.name for e in sample_events() for p in points_of(e)}
    assert all(any(name.startswith(rule.prefix) for name in made) for rule in ESPER_UNAVAILABLE)
    with pytest.raises(ValueError, match="PPOUpdate has no field 'loss'"):
        series_of(PPOUpdate, "loss")
