"""/ws/watch against a real server: replay then live, filters, the seam under concurrent ingest,
and a stalled watcher that is closed (and resumes from its cursor) while everyone else keeps going."""

import asyncio
import json
import re
import socket

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from leyline import EventKind, RunStarted, make_event
from leyline.esper import EsperKind
from leyline.frames import CLOSE_BAD_FRAME, CLOSE_LAGGING
from nissa_server.settings import ConnectionLimits
from tests.support import (
    IngestClient,
    async_wait_for,
    close_of,
    collect_watch,
    events_for,
    ingest_events,
    running_server,
    ws_url,
)

MIXED = (EventKind.HEARTBEAT, EsperKind.EPOCH_COMPLETED, EventKind.ANOMALY_DETECTED)


async def test_replay_then_live_with_cursors(server_url):
    async with IngestClient(server_url, "rl") as client:
        await client.send(events_for("rl", 20))
        await client.wait_ack(20)
        watch = asyncio.create_task(collect_watch(server_url, 30, run_id="rl", after_seq=5))
        await asyncio.sleep(0.2)
        await client.send(events_for("rl", 15, start_seq=21))
        events, cursor = await watch
        assert [e["seq"] for e in events] == list(range(6, 36))
        # Resuming from a cursor returns exactly what came after it.
        more = asyncio.create_task(collect_watch(server_url, 5, run_id="rl", after_id=cursor))
        await client.send(events_for("rl", 5, start_seq=36))
        events, _ = await more
        assert [e["seq"] for e in events] == list(range(36, 41))


async def test_filters_by_kind_and_severity(server_url):
    await ingest_events(server_url, events_for("flt", 30, kinds=MIXED))
    events, _ = await collect_watch(server_url, 10, run_id="flt", kind="epoch_completed")
    assert {e["kind"] for e in events} == {"epoch_completed"} and len(events) == 10
    events, _ = await collect_watch(server_url, 10, run_id="flt", min_severity="warning")
    assert {e["kind"] for e in events} == {"anomaly_detected"}
    events, _ = await collect_watch(server_url, 20, run_id="flt", kind="heartbeat,anomaly_detected")
    assert [e["seq"] for e in events] == [s for s in range(1, 31) if s % 3 != 2]


async def test_no_run_id_watches_every_run(server_url):
    watch = asyncio.create_task(collect_watch(server_url, 20))
    await ingest_events(server_url, events_for("all-a", 10))
    await ingest_events(server_url, events_for("all-b", 10))
    events, _ = await watch
    assert sorted({e["run_id"] for e in events}) == ["all-a", "all-b"]


async def test_watching_a_run_before_it_exists(server_url):
    watch = asyncio.create_task(collect_watch(server_url, 10, run_id="later"))
    await asyncio.sleep(0.2)
    await ingest_events(server_url, events_for("other", 5))
    await ingest_events(server_url, events_for("later", 10))
    events, _ = await watch
    assert [e["seq"] for e in events] == list(range(1, 11)) and {e["run_id"] for e in events} == {"later"}


async def test_no_gap_or_duplicate_at_the_seam_under_concurrent_ingest(server_url):
    total, batch = 6000, 150

    async def ingest():
        async with IngestClient(server_url, "seam") as client:
            for start in range(1, total + 1, batch):
                await client.send(events_for("seam", batch, start_seq=start))
                await asyncio.sleep(0.005)
            await client.wait_ack(total)

    feeder = asyncio.create_task(ingest())
    watchers = []
    for _ in range(6):  # join at different points of the stream
        await asyncio.sleep(0.05)
        watchers.append(asyncio.create_task(collect_watch(server_url, total, timeout=60, run_id="seam")))
    await feeder
    for watch in watchers:
        events, _ = await watch
        assert [e["seq"] for e in events] == list(range(1, total + 1))


async def _read_until_closed(ws):
    seqs, cursor = [], 0
    try:
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
            seqs += [e["seq"] for e in frame["events"]]
            cursor = frame["cursor"]
    except ConnectionClosed as closed:
        return seqs, cursor, closed.rcvd.code, closed.rcvd.reason


async def test_stalled_watcher_is_closed_and_resumes_from_its_cursor(tmp_path):
    with running_server(tmp_path, watcher_max_pending=3000) as url:
        fanout = url.app.state.nissa.fanout
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fill up quickly when not read
        sock.connect((url.split("//")[1].split(":")[0], int(url.rsplit(":", 1)[1])))
        async with connect(ws_url(url, "/ws/watch", run_id="stall"), sock=sock, max_queue=1,
                           max_size=None) as stalled:
            healthy = asyncio.create_task(collect_watch(url, 1, run_id="stall"))
            seq = 0
            async with IngestClient(url, "stall") as client:
                while fanout.lagged == 0 and seq < 400_000:
                    await client.send(events_for("stall", 500, start_seq=seq + 1))
                    seq += 500
                    await client.wait_ack(seq)
                assert fanout.lagged == 1, "the stalled watcher was never closed"
                await client.send(events_for("stall", 100, start_seq=seq + 1))
                seq += 100
                await client.wait_ack(seq)
            got, cursor, code, reason = await _read_until_closed(stalled)
        assert code == CLOSE_LAGGING and f"after_id={cursor}" in reason
        await healthy
        everything, _ = await collect_watch(url, seq, run_id="stall")
        assert [e["seq"] for e in everything] == list(range(1, seq + 1))
        rest, _ = await collect_watch(url, seq - len(got), after_id=int(re.search(r"after_id=(\d+)", reason)[1]),
                                      run_id="stall")
        assert got + [e["seq"] for e in rest] == list(range(1, seq + 1))
        await async_wait_for(lambda: not fanout.watchers, message="watchers gone")


TCP_ESTABLISHED = 1
TCP_CLOSE = 7


def _tcp_state(sock: socket.socket) -> int:
    if sock.fileno() == -1:  # the client saw the server's cut first and closed its end
        return TCP_CLOSE
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]  # tcpi_state comes first (Linux)


def _stalled_socket(url: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fill up quickly when not read
    sock.connect((url.split("//")[1].split(":")[0], int(url.rsplit(":", 1)[1])))
    return sock


async def test_stalled_watchers_lose_their_tcp_connection_and_pin_a_bounded_amount(tmp_path):
    """Watchers that stop reading: closed as lagging and then cut, not left ESTABLISHED with data queued."""
    with running_server(tmp_path, watcher_max_pending=3000, watcher_max_pending_bytes=200_000,
                        limits=ConnectionLimits(close_grace_s=0.2, write_buffer_bytes=16384)) as url:
        fanout = url.app.state.nissa.fanout
        socks = [_stalled_socket(url) for _ in range(3)]
        # No client pings: a client that stops reading would miss the pongs and cut the connection itself.
        stalled = [await connect(ws_url(url, "/ws/watch", run_id="stall"), sock=s, max_queue=1, max_size=None,
                                 ping_interval=None) for s in socks]
        seq = 0
        async with IngestClient(url, "stall") as client:
            while fanout.lagged < len(stalled) and seq < 400_000:
                await client.send(events_for("stall", 500, start_seq=seq + 1))
                seq += 500
                await client.wait_ack(seq)
                assert all(w.pending_bytes <= w.max_bytes for w in fanout.watchers)
        assert fanout.lagged == len(stalled)
        for sock in socks:
            await async_wait_for(lambda sock=sock: _tcp_state(sock) != TCP_ESTABLISHED, message="TCP cut")
        await async_wait_for(lambda: not fanout.watchers, message="watchers gone")
        for ws in stalled:
            ws.transport.abort()


async def test_a_cursor_past_the_end_still_gets_live_events(server_url):
    # A watcher that connects as soon as the events are acked: on PostgreSQL they are committed then, and
    # published to watchers only when their notification comes back (a race lost one time in four).
    fanout = server_url.app.state.nissa.fanout
    for attempt in range(12):
        run_id = f"far{attempt}"
        await async_wait_for(lambda: not fanout.watchers, message="the last attempt's watcher gone")
        await ingest_events(server_url, events_for(run_id, 5))
        watch = asyncio.create_task(collect_watch(server_url, 3, run_id=run_id, after_id=10**9))
        # Registered, and its start read: an event sent before that would be behind its cursor.
        await async_wait_for(lambda: bool(fanout.watchers), message="the watcher registered")
        await asyncio.sleep(0.1)
        async with IngestClient(server_url, run_id) as client:
            await client.send(events_for(run_id, 8)[5:])
            events, _ = await watch
        assert [e["seq"] for e in events] == [6, 7, 8], attempt


async def test_bad_query_is_refused_with_a_reason(server_url):
    for query in ({"after_seq": "-1"}, {"after_id": "x"}, {"after_id": str(2**63)}, {"kind": "weather"},
                  {"min_severity": "loud"}, {"after_seq": "1_0"}, {"after_id": " 1"}, {"after_seq": "2 "},
                  {"rank": "\u0661"}, {"after_id": "1" * 400}):
        async with connect(ws_url(server_url, "/ws/watch", **query)) as ws:
            code, reason = await close_of(ws)
        assert code == CLOSE_BAD_FRAME and reason, query


async def test_the_largest_cursors_the_schema_accepts_wait_for_live_events(server_url):
    await ingest_events(server_url, events_for("top", 3))
    for params in ({"after_id": 2**63 - 1}, {"after_seq": 2**63 - 1}, {"after_seq": 2**63 - 1, "rank": 65535},
                   {"after_seq": 2**63 - 1, "rank": -1, "kind": "anomaly_detected"}):
        async with connect(ws_url(server_url, "/ws/watch", run_id="top", **params)) as ws:
            try:
                frame = await asyncio.wait_for(ws.recv(), 0.3)
            except TimeoutError:
                frame = None
            assert frame is None, (params, frame)  # nothing is after these cursors, and the socket stays open
            assert ws.close_code is None


async def test_a_replay_cut_by_its_bytes_goes_on_to_the_end(server_url):
    # 44 events of 250 KB in blocks of 6: 11 MB, past the 8 MiB a replay page holds (it ends after the block
    # that passes it): the replay goes on to the end, then live events follow.
    blob = {"blob": "x" * 250_000}
    big = [make_event(RunStarted(name="big", config=blob), run_id="huge", seq=seq, ts=1.7e9) for seq in range(1, 45)]
    await ingest_events(server_url, big, batch=6)
    watch = asyncio.create_task(collect_watch(server_url, 46, run_id="huge", timeout=60))
    async with IngestClient(server_url, "huge") as client:
        await client.send(events_for("huge", 46)[44:])
        events, _ = await watch
    assert [e["seq"] for e in events] == list(range(1, 47))
