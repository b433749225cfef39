"""Distributions of a run read back: one name's histograms over steps, downsampled, as JSON or CSV rows.

A read runs on a reader thread (``Store.read``) and costs about what it returns: the steps are chosen from
the index by name (``store.histograms_sql``) before anything is decoded, only the chosen events are read
back, each is decoded with every distribution's bins left raw but the named one's, and quantiles are computed
for what is returned. What a read would decode is known before it starts: more than ``max_bytes`` (the
server's ``max_read_bytes``) or ``MAX_READ_EVENTS`` is refused (``TooMuchWork``) with the parameters that narrow it.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator

import msgspec

from leyline.payloads_histogram import QUANTILES, Distribution, HistogramAt, HistogramsReply, quantiles
from leyline.text import csv_row
from nissa_server.store import histograms_sql
from nissa_server.store.blocks import Block
from nissa_server.store.conn import Conn
from nissa_server.store.series_queries import in_snapshot

MAX_READ_EVENTS = 20_000
"""``histogram`` events one request decodes at most."""
_MIB = 1024 * 1024
FETCH = 16
"""Events read back in one query (a few MiB at most: a model's every layer is a few hundred KiB an event)."""


class TooMuchWork(ValueError):
    """A read that would decode more than one request may; the message says how to narrow it."""


class _Dist(msgspec.Struct):
    name: str
    min: float | None
    max: float | None
    count: int
    bins: msgspec.Raw
    nonfinite: int = 0


class _Payload(msgspec.Struct):
    histograms: list[_Dist]


class _Head(msgspec.Struct):
    rank: int = 0
    step: int = 0
    epoch: int = 0
    ts: float = 0.0


class _Event(_Head):
    payload: _Payload | None = None


_event = msgspec.json.Decoder(_Event).decode
_head = msgspec.json.Decoder(_Head).decode
_dist = msgspec.json.Decoder(_Dist).decode
_bins = msgspec.json.Decoder(list[int]).decode
_encode = msgspec.json.Encoder().encode
_PAYLOAD = b',"payload":'


def _at(head: _Head, d: _Dist) -> HistogramAt:
    bins = _bins(d.bins)
    dist = Distribution(name=d.name, min=d.min, max=d.max, count=d.count, nonfinite=d.nonfinite, bins=bins)
    return HistogramAt(rank=head.rank, step=head.step, epoch=head.epoch, ts=head.ts, min=d.min, max=d.max,
                       count=d.count, nonfinite=d.nonfinite, bins=bins, quantiles=quantiles(dist))


def _found(body: bytes, name: str) -> HistogramAt | None:
    """The first distribution called ``name`` found in the event's JSON as the server stores it (the envelope's
    fields before its payload, each distribution's ``bins`` last), without parsing the others; None where the JSON
    is not laid out so (``pick`` then decodes the event)."""
    end = body.find(_PAYLOAD)
    start = body.find(b'{"name":' + _encode(name) + b",", end)
    if end < 0 or start < 0:
        return None
    bins = body.find(b'"bins":[', start)
    close = body.find(b"]", bins)
    if bins < 0 or body[close + 1:close + 2] != b"}":
        return None
    try:
        return _at(_head(body[:end] + b"}"), _dist(body[start:close + 2]))
    except msgspec.DecodeError:  # a label called "name", say: decoded whole
        return None


def pick(body: bytes, name: str) -> list[HistogramAt]:
    """The distribution called ``name`` in one ``histogram`` event's JSON (only its bins decoded): the first of
    them in an event stored before ingest refused a second of one name, so ``max_steps`` bounds distributions."""
    found = _found(body, name)
    if found is not None:
        return [found]
    event = _event(body)
    first = next((d for d in (event.payload.histograms if event.payload else ()) if d.name == name), None)
    return [] if first is None else [_at(event, first)]


def offsets(n: int, max_steps: int) -> list[int] | None:
    """Which of ``n`` steps (0-based, in step order) a reply of at most ``max_steps`` holds: evenly spread, the
    first and the last kept; None for all of them."""
    if n <= max_steps:
        return None
    last = n - 1
    return sorted({round(i * last / (max_steps - 1)) for i in range(max_steps)}) if max_steps > 1 else [last]


def _plan(conn: Conn, run_key: int, name: str, rank: int | None, max_steps: int,
          max_bytes: int) -> tuple[dict[int, list[int] | None], int]:
    """Rank → the offsets to read, and how many distributions the run holds; ``TooMuchWork`` if they cost more."""
    per_rank = histograms_sql.counts(conn, run_key, name, rank)
    plan = {r: offsets(n, max_steps) for r, (n, _) in per_rank.items()}
    events = sum(n if plan[r] is None else len(plan[r] or ()) for r, (n, _) in per_rank.items())
    cost = sum(b if plan[r] is None else b * len(plan[r] or ()) // max(n, 1) for r, (n, b) in per_rank.items())
    if events > MAX_READ_EVENTS or cost > max_bytes:
        each = max(1, cost // max(events, 1))
        fits = max(1, min(max_bytes // each, MAX_READ_EVENTS) // max(len(per_rank), 1))
        ranks = f" or one rank (rank={min(per_rank)})" if len(per_rank) > 1 else ""
        raise TooMuchWork(f"{name!r}: this read would decode {events} events ({cost / _MIB:.0f} MiB), more than one "
                          f"request may ({MAX_READ_EVENTS} events, {max_bytes / _MIB:.0f} MiB): ask for fewer steps "
                          f"(max_steps={min(fits, max_steps - 1) if max_steps > 1 else 1}){ranks}")
    return plan, sum(n for n, _ in per_rank.values())


@in_snapshot
def read_histograms(conn: Conn, run_key: int, name: str, rank: int | None, max_steps: int, fmt: str,
                    max_bytes: int) -> bytes:
    """The reply of ``GET /runs/{id}/histograms/{name}``, encoded (JSON or CSV)."""
    plan, taken = _plan(conn, run_key, name, rank, max_steps, max_bytes)
    found: list[HistogramAt] = []
    for r, chosen in plan.items():
        ids = [event_id for _, event_id, _ in histograms_sql.chosen(conn, run_key, name, r, chosen)]
        for body in _bodies(conn, ids):
            found.extend(pick(body, name))
    reply = HistogramsReply(name=name, quantiles=list(QUANTILES), histograms=found, taken=taken)
    return to_csv(reply).encode() if fmt == "csv" else _encode(reply)


def _bodies(conn: Conn, ids: list[int]) -> Iterator[bytes]:
    """The JSON of the events ``ids`` (those still stored), a few blocks read at a time: each its own block (as
    ``blocks.pack`` stores them), or in one with others where an older server stored it so."""
    block: Block | None = None
    for at in range(0, len(ids), FETCH):
        chunk = ids[at:at + FETCH]
        alone = histograms_sql.blocks_at(conn, chunk)
        for event_id in chunk:
            if event_id in alone:
                yield alone[event_id].body
                continue
            if block is None or not block.first_id <= event_id <= block.last_id:
                block = histograms_sql.block_of(conn, event_id)
            if block is not None:  # else deleted since the index was read: nothing to show
                yield block.events()[event_id - block.first_id]


def to_csv(reply: HistogramsReply) -> str:
    """``rank,step,ts,bin,low,high,count``: a row per bin."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["rank", "step", "ts", "bin", "low", "high", "count"])
    for h in reply.histograms:
        if h.min is None or h.max is None or not (math.isfinite(h.min) and math.isfinite(h.max)):
            continue  # no bounds to write (one stored before the ingest checks may hold NaN or infinities)
        width = (h.max - h.min) / len(h.bins)
        for i, n in enumerate(h.bins):
            writer.writerow(csv_row([h.rank, h.step, h.ts, i, h.min + i * width, h.min + (i + 1) * width, n]))
    return buf.getvalue()
