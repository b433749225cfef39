"""The kind table: one row per kind, read by the hub's drop policy and the store's index."""

import math
import typing

import msgspec
import pytest

from leyline import (
    CRITICAL_KINDS,
    DEFAULT_SEVERITY,
    INDEXED_KINDS,
    KINDS,
    MAX_METRICS,
    METRIC_KINDS,
    EventKind,
    Metrics,
    Severity,
    decode_event,
    encode_event,
    make_event,
    metric_value,
)
from leyline.codec import encode_checked
from leyline.events import AnyPayload, Event
from nissa_server.store.sql import INDEXED_KIND_SET


def test_the_written_out_payload_union_is_the_table():
    members = typing.get_args(AnyPayload)
    assert len(members) == len(set(members)) == len(KINDS)
    assert set(members) == {spec.payload for spec in KINDS.values()}
    assert typing.get_type_hints(Event)["payload"] == AnyPayload


def test_the_derived_sets_follow_the_table():
    assert METRIC_KINDS == {k for k, spec in KINDS.items() if not spec.critical}
    assert CRITICAL_KINDS == set(EventKind) - METRIC_KINDS
    assert INDEXED_KIND_SET == {k.value for k in INDEXED_KINDS}
    assert DEFAULT_SEVERITY[EventKind.ANOMALY_DETECTED] is Severity.WARNING
    assert EventKind.METRICS in METRIC_KINDS and EventKind.RUN_STARTED in INDEXED_KINDS


def test_an_indexed_kind_is_critical():
    assert INDEXED_KINDS <= CRITICAL_KINDS


def _metrics_event(values, labels=None):
    return make_event(Metrics(values=values, labels=labels or {}), run_id="r", seq=1, ts=1.0, step=7)


def test_metrics_carry_non_finite_values_explicitly():
    values = {"loss": metric_value(math.nan), "grad/max": metric_value(math.inf), "lr": metric_value(3e-4),
              "neg": metric_value(-math.inf)}
    back = decode_event(encode_event(_metrics_event(values, {"split": "val"})))
    assert back.payload.values == {"loss": "nan", "grad/max": "inf", "lr": 3e-4, "neg": "-inf"}
    assert back.step == 7 and back.payload.labels == {"split": "val"}


@pytest.mark.parametrize("values", [
    {"bad name": 1.0},
    {"1st": 1.0},
    {"loss": math.nan},  # a bare NaN encodes as null: refused, not stored as a hole
    {"loss": "high"},
    {"loss": True},
    {},
    {f"m{i}": 1.0 for i in range(MAX_METRICS + 1)},
])
def test_bad_metrics_are_refused_at_their_field(values):
    with pytest.raises(msgspec.ValidationError, match=r"^metrics: .*\.values(`|\[)"):
        encode_checked(Metrics(values=values), run_id="r", rank=0, seq=1, ts=1.0, step=0, epoch=0, env=None,
                       severity=Severity.INFO)


def test_an_unknown_kind_is_refused_naming_the_kind():
    data = encode_event(_metrics_event({"loss": 1.0})).replace(b'"kind":"metrics"', b'"kind":"my_kind"')
    with pytest.raises(msgspec.ValidationError, match="kind"):
        decode_event(data)
