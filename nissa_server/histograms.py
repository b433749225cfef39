"""Distributions of a run read back: one name's histograms over steps, downsampled, as JSON or CSV rows."""

from __future__ import annotations

import csv
import io

from leyline import Event, Histograms
from leyline.payloads_histogram import HistogramAt, HistogramsReply, quantiles


def pick(events: list[Event], name: str) -> list[HistogramAt]:
    """The distributions called ``name`` among ``histogram`` events."""
    out = []
    for e in events:
        payload: object = e.payload
        if not isinstance(payload, Histograms):
            continue
        for d in payload.histograms:
            if d.name == name:
                out.append(HistogramAt(rank=e.rank, step=e.step, epoch=e.epoch, ts=e.ts, min=d.min, max=d.max,
                                       count=d.count, nonfinite=d.nonfinite, bins=d.bins, quantiles=quantiles(d)))
    return out


def downsample(found: list[HistogramAt], max_steps: int) -> list[HistogramAt]:
    """At most ``max_steps`` per rank, evenly spread, the first and the last kept."""
    out: list[HistogramAt] = []
    for rank in sorted({h.rank for h in found}):
        mine = sorted((h for h in found if h.rank == rank), key=lambda h: h.step)
        if len(mine) > max_steps:
            last = len(mine) - 1
            chosen = sorted({round(i * last / (max_steps - 1)) for i in range(max_steps)}) if max_steps > 1 else [last]
            mine = [mine[i] for i in chosen]
        out.extend(mine)
    return out


def to_csv(reply: HistogramsReply) -> str:
    """``rank,step,ts,bin,low,high,count``: a row per bin."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["rank", "step", "ts", "bin", "low", "high", "count"])
    for h in reply.histograms:
        if h.min is None or h.max is None:
            continue
        width = (h.max - h.min) / len(h.bins)
        for i, n in enumerate(h.bins):
            writer.writerow([h.rank, h.step, h.ts, i, h.min + i * width, h.min + (i + 1) * width, n])
    return buf.getvalue()
