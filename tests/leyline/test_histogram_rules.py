"""A ``histogram`` payload is checked as it is decoded (``leyline.payloads_histogram.distribution_problem``):
finite ``min <= max`` (or both null with nothing binned), bins and ``nonfinite`` from 0 to 2⁶³−1, ``count`` the
sum of the bins, at most ``MAX_BINS`` bins; a refusal names the distribution and the rule."""

from __future__ import annotations

import math

import msgspec
import pytest

from leyline import EventKind, decode_event, encode_event, make_event
from leyline.codec import decode_frame_wire, encode_checked
from leyline.enums import Severity
from leyline.payloads_histogram import MAX_BINS, Distribution, Histograms, one_a_name, second_name
from leyline.samples import SAMPLE_PAYLOADS

GOOD = {"name": "w", "min": -1.0, "max": 1.0, "count": 6, "nonfinite": 0, "bins": [1, 2, 3]}
BAD = [
    ({"min": 2.0, "max": 1.0}, "min 2.0 is above max 1.0"),
    ({"min": float("nan")}, "min and max must be finite numbers"),  # made here (JSON has no NaN: null)
    ({"max": float("inf")}, "min and max must be finite numbers"),
    ({"max": None}, "min and max are both numbers or both null"),
    ({"min": None, "max": None}, "without min and max it holds no finite value"),
    ({"bins": [1, -2, 7], "count": 6}, "bin 1 counts -2"),
    ({"bins": [2**64 - 1, 0, 0], "count": 2**64 - 1}, "bin 0 counts 18446744073709551615"),
    ({"count": 7}, "count 7 is not the sum of its bins (6)"),
    ({"count": 5}, "count 5 is not the sum of its bins (6)"),
    ({"nonfinite": -1}, "nonfinite -1"),
    ({"nonfinite": 2**64 - 1}, "nonfinite 18446744073709551615"),
    ({"bins": [2**63 - 1, 2**63 - 1], "count": 2**64 - 2}, "count 18446744073709551614"),
    ({"min": -1.7e308, "max": 1.7e308}, "max - min must be finite, not 1.7e+308 - -1.7e+308"),
]


def _line(*dists: dict) -> bytes:
    """A ``histogram`` event's JSON holding ``dists`` as sent (JSON allows what a ``Distribution`` refuses)."""
    event = msgspec.to_builtins(make_event(SAMPLE_PAYLOADS[EventKind.HISTOGRAM], run_id="r", seq=1, ts=1.7e9))
    event["payload"]["histograms"] = list(dists)
    return msgspec.json.encode(event)


@pytest.mark.parametrize(("change", "words"), BAD)
def test_a_histogram_breaking_a_rule_is_refused_with_the_rule_in_words(change, words):
    dist = {**GOOD, **change}
    with pytest.raises(ValueError) as made:
        Histograms(histograms=[Distribution(**dist)])
    assert words in str(made.value) and "histograms[0] ('w')" in str(made.value), str(made.value)
    if all(math.isfinite(v) for v in (dist["min"], dist["max"]) if v is not None):  # what JSON can carry
        with pytest.raises(msgspec.ValidationError) as refused:
            decode_event(_line(dist))
        assert words in str(refused.value) and "histograms[0] ('w')" in str(refused.value), str(refused.value)


def test_a_valid_histogram_and_the_samples_pass():
    for dist in (GOOD, {**GOOD, "min": 0.5, "max": 0.5, "nonfinite": 3},
                 {"name": "nan_only", "min": None, "max": None, "count": 0, "nonfinite": 4, "bins": [0, 0]}):
        assert decode_event(_line(dist)).payload.histograms[0].count == dist["count"]
    sample = make_event(SAMPLE_PAYLOADS[EventKind.HISTOGRAM], run_id="r", seq=1, ts=1.7e9)
    assert decode_event(encode_event(sample)) == sample


def test_bins_are_capped():
    with pytest.raises(msgspec.ValidationError, match=f"length <= {MAX_BINS}"):
        decode_event(_line({**GOOD, "count": 0, "bins": [0] * (MAX_BINS + 1)}))


def test_a_new_event_holds_one_distribution_of_each_name_and_one_stored_before_the_rule_still_reads():
    w, v, w_again = Distribution(**GOOD), Distribution(**{**GOOD, "name": "v"}), Distribution(**{**GOOD, "min": 0.0})
    held = Histograms(histograms=[w, v, w_again])
    assert second_name(held) == ("histograms[2] ('w'): a second distribution of that name: an event holds one of "
                                 "each name")
    assert second_name(Histograms(histograms=[w, v])) is None
    with pytest.raises(msgspec.ValidationError, match=r"histograms\[2\] \('w'\): a second distribution"):
        encode_checked(held, run_id="r", rank=0, seq=1, ts=1.0, step=0, epoch=0, env=None, severity=Severity.INFO)
    frame = b'{"type":"events","events":[' + _line(GOOD, GOOD) + b']}'
    with pytest.raises(msgspec.ValidationError, match=r"histograms\[1\] \('w'\): .* one of each name - at "
                                                      r"`\$\.events\[0\]\.payload`"):
        decode_frame_wire(frame)
    assert len(decode_event(_line(GOOD, GOOD)).payload.histograms) == 2  # as stored: it reads
    assert one_a_name([w, v, w_again]) == [w, v]
