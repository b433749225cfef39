"""TensorBoard summary values as Nissa payloads: a scalar, a histogram (its buckets split across Nissa's bins),
text, hparams. A value that is not what its plugin says (a vector or a string where a scalar is, buckets of
another shape, a tensor whose values do not fit its shape, edges that are not finite, counts negative or past
2^63-1, a distribution the contract refuses, hparams that do not parse) raises ``BadValue`` with what is wrong,
in a few words a summary can count (and where it says more, its ``detail``)."""

from __future__ import annotations

import itertools
import math
from typing import Any

from leyline import Distribution
from leyline.payloads import MAX_INT
from leyline.payloads_histogram import DEFAULT_BINS, distribution_problem


class BadValue(ValueError):
    """A summary value that cannot be imported; its message is the reason, the same for every value alike, and
    ``detail`` what is wrong with this one (empty where the reason says it all)."""

    def __init__(self, why: str, detail: str = "") -> None:
        super().__init__(why)
        self.detail = detail


def ndarray(tensor: Any, what: str) -> Any:
    """``tensor`` as a numpy array; ``BadValue`` where its values do not fit its shape or its type is none numpy
    has (``make_ndarray`` raises ``ValueError`` or ``TypeError``)."""
    from tensorboard.util import tensor_util

    try:
        return tensor_util.make_ndarray(tensor)
    except (ValueError, TypeError):
        raise BadValue(f"{what} tensor that does not parse") from None


def scalar(tensor: Any) -> float:
    """The one number a ``scalars`` tensor holds."""
    array = ndarray(tensor, "scalar")
    if array.size != 1:
        raise BadValue(f"scalar of shape {list(array.shape)}, not one number")
    if array.dtype.kind not in "biuf":
        raise BadValue("scalar that is not a number")
    return float(array.reshape(-1)[0])


def buckets_of(tensor: Any) -> list[tuple[float, float, float]]:
    """A ``histograms`` tensor's ``[left, right, count]`` buckets, each checked: finite edges, left <= right, a
    finite count from 0 to 2^63-1."""
    array = ndarray(tensor, "histogram")
    if array.dtype.kind not in "biuf":
        raise BadValue("histogram that is not numbers")
    if array.size and (array.ndim != 2 or array.shape[1] != 3):
        raise BadValue(f"histogram of shape {list(array.shape)}, not [left, right, count] buckets")
    out = [(float(left), float(right), float(count)) for left, right, count in array.reshape(-1, 3)]
    if not all(math.isfinite(left) and math.isfinite(right) for left, right, _ in out):
        raise BadValue("histogram edges not finite")
    if any(right < left for left, right, _ in out):
        raise BadValue("histogram bucket with its right edge before its left")
    if not all(math.isfinite(count) and count >= 0 for _, _, count in out):
        raise BadValue("histogram count negative or not finite")
    if any(count > MAX_INT for _, _, count in out):
        raise BadValue("histogram count past 2^63-1")
    return out


def check_legacy_histogram(histo: Any) -> None:
    """A legacy ``HistogramProto`` (TensorFlow 1, ``tensorboardX``) checked before TensorBoard's migration to
    ``[left, right, count]`` buckets, which pads or drops buckets where it does not hold one limit per count:
    as many ``bucket_limit`` as ``bucket``, limits that never decrease, finite counts from 0 to 2^63-1."""
    limits, counts = list(histo.bucket_limit), list(histo.bucket)
    if len(limits) != len(counts):
        raise BadValue("histogram of bucket limits and counts of different lengths",
                       f"{len(limits)} limits, {len(counts)} counts")
    if any(right < left for left, right in itertools.pairwise(limits)):
        raise BadValue("histogram bucket with its right edge before its left")
    if not all(math.isfinite(count) and count >= 0 for count in counts):
        raise BadValue("histogram count negative or not finite")
    if any(count > MAX_INT for count in counts):
        raise BadValue("histogram count past 2^63-1")


def histogram(name: str, tensor: Any) -> Distribution:
    """A ``histograms`` tensor as a distribution the contract takes (``distribution_problem``: its counts
    together may still pass 2^63-1)."""
    d = distribution(name, buckets_of(tensor))
    why = distribution_problem(d)
    if why is not None:
        raise BadValue("histogram the contract refuses", why)
    return d


def distribution(name: str, buckets: list[tuple[float, float, float]], bins: int = DEFAULT_BINS) -> Distribution:
    """TensorBoard's ``[left, right, count]`` buckets (of any widths) as ``bins`` bins of equal width from the
    first filled bucket's left edge to the last one's right edge: each bucket's count (rounded) split across the
    bins it overlaps, in proportion to the overlap (a bucket of no width, a constant's, in the bin of its edge)."""
    filled = [b for b in buckets if b[2] > 0]
    if not filled:
        return Distribution(name=name, min=None, max=None, count=0, bins=[0] * bins)
    lo, hi = min(left for left, _, _ in filled), max(right for _, right, _ in filled)
    width = (hi - lo) / bins
    out = [0] * bins
    for left, right, count in filled:
        for j, n in _spread(_overlaps(left, right, lo, hi, width, bins), round(count)):
            out[j] += n
    return Distribution(name=name, min=lo, max=hi, count=sum(out), bins=out)


def _overlaps(left: float, right: float, lo: float, hi: float, width: float, bins: int) -> list[tuple[int, float]]:
    """The bins ``[left, right]`` overlaps and by how much (all of it in one bin where it has no width)."""
    first = 0 if width == 0 else min(bins - 1, max(0, int((left - lo) / width)))
    if width == 0 or right == left:
        return [(first, 1.0)]
    last = min(bins - 1, max(0, int((right - lo) / width)))
    out = []
    for j in range(first, last + 1):
        overlap = min(right, lo + (j + 1) * width if j < bins - 1 else hi) - max(left, lo + j * width)
        if overlap > 0:
            out.append((j, overlap))
    return out or [(first, 1.0)]


def _spread(shares: list[tuple[int, float]], count: int) -> list[tuple[int, int]]:
    """``count`` split across bins in proportion to ``shares``, in whole values: each bin the rounded running
    total less what the bins before it got, so the counts add up to ``count`` and spread as the shares do."""
    scale = count / sum(share for _, share in shares)
    out, running, given = [], 0.0, 0
    for j, share in shares:
        running += share * scale
        n = round(running) - given
        given += n
        out.append((j, n))
    return out


def hparams(content: bytes) -> dict[str, object]:
    """The hyperparameters of a session's start (``add_hparams``); nothing from the other hparams records."""
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]  # protobuf ships no stubs
    from tensorboard.plugins.hparams import plugin_data_pb2

    try:
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
    except DecodeError:
        raise BadValue("hparams that do not parse") from None
    if data.WhichOneof("data") != "session_start_info":
        return {}
    out: dict[str, object] = {}
    for key, v in data.session_start_info.hparams.items():
        kind = v.WhichOneof("kind")
        out[key] = {"number_value": v.number_value, "string_value": v.string_value,
                    "bool_value": v.bool_value}.get(kind or "", None)
    return out
