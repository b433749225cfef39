"""Series reads bounded in CPU and memory: a labelled read finds its label sets through the label index (it
reads the matching ones, not every label set of the name), and a reply holds at most a page of bytes, with a
``Link`` to the rest."""

from __future__ import annotations

import re

import httpx

from leyline import Metrics, encode, make_event
from leyline.codec import decode_frame_wire
from leyline.frames import EventBatch
from nissa_server.batches import build_write
from nissa_server.settings import Settings
from nissa_server.store import series_queries
from tests.support import ingest_events, running_server
from tests.support.databases import database_for, side_connection
from tests.support.stores import SESSION, settled, started

LABEL_SETS = 600


def _logged(run_id: str, labels: list[int], start: int = 1, run_started: bool = False) -> list:
    """One ``metrics`` event per label set: ``loss`` labelled ``i``, at step ``start + k``."""
    return [make_event(Metrics(values={"loss": float(i) / 7, "acc": 0.5}, labels={"i": str(i)}), run_id=run_id,
                       seq=start + k, ts=1.7e9 + start + k, step=start + k, epoch=0) for k, i in enumerate(labels)]


class _Counting:
    """A store connection that counts the rows its queries return (what a read had to look at)."""

    def __init__(self, conn) -> None:
        self.conn, self.rows = conn, 0
        self.for_update, self.greatest, self.snapshot = conn.for_update, conn.greatest, conn.snapshot

    def execute(self, query: str, params=()):
        cursor = self.conn.execute(query, params)
        rows = cursor.fetchall() if cursor.description is not None else []
        self.rows += len(rows)
        return _Rows(rows)


class _Rows(list):
    def fetchall(self) -> list:
        return list(self)

    def fetchone(self):
        return self[0] if self else None


async def _store_with_label_sets(tmp_path, n: int):
    store, (run,) = await started(tmp_path, "labelled", series_interval_s=None)
    events = decode_frame_wire(encode(EventBatch(events=_logged(run.run_id, list(range(n)))))).events
    await store.submit(build_write(run, 0, run.stream(0), events, max_event_bytes=1 << 20, session=SESSION)[0])
    await settled(store)
    while await store.series_pass.once():
        pass
    return store, run


def _read(store, run, labels, after_key=None):
    def read(conn):
        counting = _Counting(conn)
        page = series_queries.read_series(counting, run.run_key, "loss", "step", None, 2000, labels, 1000, after_key)
        return page, counting.rows

    return store.read(read)


async def test_a_labelled_read_looks_at_the_matching_label_sets_not_every_one(tmp_path):
    store, run = await _store_with_label_sets(tmp_path, LABEL_SETS)
    try:
        page, rows = await _read(store, run, {"i": "5"})
        assert [(s.key, s.x.tolist(), s.y.tolist()) for s in page.series] == [("loss{i=5,rank=0}", [6.0], [5 / 7])]
        assert rows < 10, f"{rows} rows read for one label set of {LABEL_SETS}"
        page, rows = await _read(store, run, {"i": "5", "rank": "0"})
        assert [s.key for s in page.series] == ["loss{i=5,rank=0}"] and rows < 10
        assert (await _read(store, run, {"i": "5", "rank": "1"}))[0].series == []
        # Events not charted yet (past the watermark) are found by their labels too.
        more = decode_frame_wire(encode(EventBatch(events=_logged(run.run_id, [5], start=LABEL_SETS + 1)))).events
        await store.submit(build_write(run, 0, run.stream(0), more, max_event_bytes=1 << 20, session=SESSION)[0])
        await settled(store)
        (series,) = (await _read(store, run, {"i": "5"}))[0].series
        assert series.x.tolist() == [6.0, float(LABEL_SETS + 1)]
    finally:
        await store.close()


async def test_a_database_charted_before_the_label_index_is_indexed_once_at_start(tmp_path):
    store, run = await _store_with_label_sets(tmp_path, 20)
    await store.close()
    side = side_connection(Settings(**database_for(tmp_path)))
    side.execute("DELETE FROM series_labels")
    side.execute("DELETE FROM series_progress WHERE id = 2")
    side.close()
    again, _ = await started(tmp_path, series_interval_s=None)
    try:
        (series,) = (await _read(again, run, {"i": "7"}))[0].series
        assert series.key == "loss{i=7,rank=0}"
    finally:
        await again.close()


async def test_a_series_reply_holds_a_page_and_links_to_the_rest(tmp_path):
    page_bytes = 6_000
    with running_server(tmp_path, max_page_bytes=page_bytes) as url:
        for run_id in ("a", "b"):
            events = [e for i in range(40) for e in _logged(run_id, [i] * 3, start=3 * i + 1)]
            await ingest_events(url, events)
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            for fmt in ("json", "csv"):
                pages, link = [], f"/runs/a/series/loss?runs=b&format={fmt}"
                while link:
                    reply = await http.get(link)
                    assert reply.status_code == 200, reply.text
                    assert len(reply.content) <= page_bytes
                    pages.append(reply)
                    found = re.fullmatch(r'<([^>]*)>; rel="next"', reply.headers.get("link", ""))
                    link = found.group(1) if found else ""
                assert len(pages) > 2
                got = _all_series(pages, fmt)
                assert len(got) == 80 and len(set(got)) == 80  # every label set of both runs, once
                for (_, key), points in got.items():
                    i = int(re.search(r"i=(\d+)", key).group(1))
                    assert [float(y) for _, y in points] == [i / 7] * 3, key


def _all_series(pages: list[httpx.Response], fmt: str) -> dict[tuple[str, str], list]:
    out: dict[tuple[str, str], list] = {}
    for reply in pages:
        if fmt == "json":
            for s in reply.json()["series"]:
                assert (s["run_id"], s["key"]) not in out
                out[(s["run_id"], s["key"])] = list(zip(s["x"], s["y"], strict=True))
        else:
            import csv
            import io

            rows = list(csv.reader(io.StringIO(reply.text)))
            assert rows[0] == ["run_id", "key", "x", "y"]
            for run_id, key, x, y in rows[1:]:
                out.setdefault((run_id, key), []).append((x, y))
    return out

