"""Idle, slow and greedy connections: request-head deadline and size, the connection cap (idle ones
displaced first), the watcher cap, the ingest idle timeout, and /healthz answering through all of it."""

import asyncio
import contextlib
import resource
import socket
import threading
import time

import httpx
import pytest
from websockets.asyncio.client import connect

from leyline.frames import CLOSE_IDLE, CLOSE_TOO_MANY, STREAM_SECRET_HEADER
from nissa_server.settings import ConnectionLimits
from tests.support import (
    SECRET,
    IngestClient,
    close_of,
    events_for,
    ingest_events,
    running_server,
    start_server_process,
    stop_process,
    ws_url,
)
from tests.support.waiting import wait_for

PARTIAL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "


def _address(url: str) -> tuple[str, int]:
    host, port = url.split("//")[1].rsplit(":", 1)
    return host, int(port)


def _open(url: str, n: int, send: bytes = b"") -> list[socket.socket]:
    socks = []
    for _ in range(n):
        sock = socket.create_connection(_address(url), timeout=30)
        if send:
            sock.sendall(send)
        socks.append(sock)
    return socks


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed ``sock`` (after whatever answer it sent)."""
    sock.setblocking(False)
    try:
        while data := sock.recv(65536):
            pass
        return not data
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def _answer(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _send(sock: socket.socket, data: bytes, piece: int) -> None:
    with contextlib.suppress(OSError):  # the server may stop reading once it has answered
        for i in range(0, len(data), piece):
            sock.sendall(data[i:i + piece])


def _ask(url: str, request: bytes, piece: int = 1 << 30) -> bytes:
    """The answer to ``request``, read while it is still being sent (``piece`` bytes a write), as curl does."""
    with socket.create_connection(_address(url), timeout=30) as sock:
        sender = threading.Thread(target=_send, args=(sock, request, piece), daemon=True)
        sender.start()
        answer = _answer(sock)
        sender.join(30)
    return answer


def _few_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_idle_sockets_and_trickled_heads_cannot_starve_healthz(tmp_path):
    """A server with 256 open files: 400 sockets that never finish a request would take every one."""
    proc, url = start_server_process(tmp_path / "n.db", preexec_fn=_few_open_files)
    socks: list[socket.socket] = []
    try:
        socks = _open(url, 300) + _open(url, 100, send=PARTIAL_HEAD)
        for _ in range(3):
            assert httpx.get(f"{url}/healthz", timeout=30).json()["status"] == "ok"
        # Each newcomer displaced the oldest idle connection: the server holds at most its cap.
        wait_for(lambda: sum(map(_closed_by_server, socks)) >= len(socks) - 128, message="idle sockets displaced")
    finally:
        for sock in socks:
            sock.close()
        stop_process(proc)


def test_a_head_must_come_whole_and_in_time(tmp_path):
    limits = ConnectionLimits(header_timeout_s=0.3, max_header_bytes=2000)
    with running_server(tmp_path, limits=limits) as url:
        idle, trickled = _open(url, 1)[0], _open(url, 1, send=PARTIAL_HEAD)[0]
        kept_alive = _open(url, 1, send=b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")[0]
        assert kept_alive.recv(65536).startswith(b"HTTP/1.1 200")
        kept_alive.sendall(PARTIAL_HEAD)  # its next request never completes
        huge = _open(url, 1, send=PARTIAL_HEAD + b"y" * 3000)[0]
        assert _answer(idle) == b""  # never said a word: closed without an answer
        for sock in (trickled, kept_alive):
            answer = _answer(sock)
            assert answer.startswith(b"HTTP/1.1 408") and b"no complete request head within 0.3 s" in answer
        answer = _answer(huge)
        assert answer.startswith(b"HTTP/1.1 431") and b"request head over 2000 bytes" in answer
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
    for reason in ("idle", "header_timeout", "header_too_large"):
        assert f'nissa_connections_refused_total{{reason="{reason}"}}' in metrics, reason


@pytest.mark.single_backend
def test_a_head_over_64_kib_is_answered_431_however_it_arrives(tmp_path):
    """In one write (a read of the server's may hold it all), in small ones, as a long request line, as a websocket
    handshake, or 2 MB still coming when the answer goes out; a body after a head that fits is no head."""
    refused = b"request head over 65536 bytes"
    upgrade = (b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               b"Sec-WebSocket-Version: 13\r\n")
    heads = {f"{n} bytes of header": b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: %s\r\n\r\n"
             % (b"b" * n) for n in (66_000, 100_000, 2_000_000)}
    heads["a long request line"] = b"GET /healthz?q=%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (
        b"a" * 70_000)
    heads["a websocket handshake"] = b"GET /ws/watch HTTP/1.1\r\nHost: x\r\n%s%s\r\n" % (
        b"".join(b"X-Big-%d: %s\r\n" % (i, b"b" * 7000) for i in range(10)), upgrade)
    body = b'{"run_id": "nope", "action": "debug", "epochs": 1, "reason": "r"' + b" " * 60_000 + b"}"
    post = (b"POST /escalate HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    with running_server(tmp_path) as url:
        for what, head in heads.items():
            for piece in (len(head), 4096):
                answer = _ask(url, head, piece)
                assert answer.startswith(b"HTTP/1.1 431") and answer.endswith(refused), (what, piece, answer[:200])
        answer = _ask(url, post)
        assert answer.startswith(b"HTTP/1.1 404") and b"unknown run" in answer, answer[:200]
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200


def _rest_of(sock: socket.socket) -> bytes:
    """What ``sock`` still receives until the server ends the connection (a close or a reset)."""
    sock.settimeout(120)
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.single_backend
def test_a_head_over_64_kib_behind_a_response_going_out_cuts_the_connection(tmp_path, caplog):
    """A client reads the start of a 40 MB download and stops, then sends a head over 64 KiB on the same
    connection: a 431 would land inside the 200's body. The connection is cut instead, with no traceback
    in the log, and the server keeps answering."""
    size = 40 << 20  # far more than loopback's socket buffers hold: the answer is still going out
    secret = {STREAM_SECRET_HEADER: SECRET}
    with running_server(tmp_path) as url:
        asyncio.run(ingest_events(url, events_for("big", 2)))
        put = httpx.put(f"{url}/runs/big/artifacts/a.bin", content=b"x" * size, headers=secret, timeout=120)
        assert put.status_code == 201, put.text
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(120)
        with sock:
            sock.connect(_address(url))
            sock.sendall(b"GET /runs/big/artifacts/a.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            received = b""
            while b"\r\n\r\n" not in received:  # the 200's head, then the client stops reading
                received += sock.recv(4096)
            assert received.startswith(b"HTTP/1.1 200"), received[:200]
            _send(sock, b"GET /healthz?" + b"a" * 70_000, 4096)
            received += _rest_of(sock)
        assert len(received) < size  # cut short: the head came while the answer was going out
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert 'nissa_connections_refused_total{reason="header_too_large"}' in metrics
    logged = [r.getMessage() for r in caplog.records if r.exc_info or "Exception in ASGI" in r.getMessage()]
    answered = received.find(b"HTTP/1.1 431")
    assert answered < 0 and not logged, (received[answered:answered + 200], logged)


@pytest.mark.single_backend
def test_a_body_must_keep_coming(tmp_path):
    """A body that stalls after its first bytes, or trickles under the rate, is answered 408 and closed; one
    that keeps the rate is served; a body the app never read is cut after its answer."""
    # The steady body comes at 8 times the least rate, the trickle at under half of it: a busy machine that
    # stretches the test's sleeps only slows the trickle further, and would need to stretch them 8-fold to
    # fail the steady one.
    limits = ConnectionLimits(header_timeout_s=0.3, min_body_rate=250)
    head = b"POST /escalate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    body = b'{"run_id": "nope", "action": "debug", "epochs": 1, "reason": "' + b"r" * 400 + b'"}'
    with running_server(tmp_path, limits=limits) as url:
        stalled = _open(url, 1, send=head % len(body) + body[:20])[0]
        answer = _answer(stalled)
        assert answer.startswith(b"HTTP/1.1 408") and b"request body slower than 250 bytes/s" in answer

        trickled = _open(url, 1, send=head % len(body))[0]
        for i in range(0, 100, 10):  # 10 bytes every 0.1 s: 100 bytes/s
            try:
                trickled.sendall(body[i:i + 10])
            except OSError:
                break
            time.sleep(0.1)
        assert _answer(trickled).startswith(b"HTTP/1.1 408")

        padded = body[:-1] + b" " * 1600 + b"}"  # about a second at 2,000 bytes/s: three windows
        steady = _open(url, 1, send=head % len(padded))[0]
        for i in range(0, len(padded), 100):  # 100 bytes every 0.05 s
            steady.sendall(padded[i:i + 100])
            time.sleep(0.05)
        steady.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = _answer(steady)
        assert answer.startswith(b"HTTP/1.1 404") and b"unknown run" in answer and b"HTTP/1.1 200" in answer

        unread = _open(url, 1, send=b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")[0]
        answer = _answer(unread)  # answered at once (it reads no body), then cut: the rest never came
        assert answer.startswith(b"HTTP/1.1 200") and b"408" not in answer
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert 'nissa_connections_refused_total{reason="body_timeout"}' in metrics


@pytest.mark.single_backend
def test_a_body_that_stops_short_is_a_client_error(tmp_path, caplog):
    """The route was reading the body when the server answered 408 and closed: the route's read ends, and that
    is the client's doing: no traceback in the log, no 5xx in /metrics."""
    limits = ConnectionLimits(header_timeout_s=0.3, min_body_rate=1000)
    body = b'{"run_id": "nope", "action": "debug", "epochs": 1}'
    secret = f"{STREAM_SECRET_HEADER}: {SECRET}".encode()
    routes = ((b"POST /escalate", body), (b"PUT /runs/up/artifacts/a.txt", b"x" * 100))
    with running_server(tmp_path, limits=limits) as url:
        asyncio.run(ingest_events(url, events_for("up", 2)))
        for request, content in routes:
            head = request + b" HTTP/1.1\r\nHost: x\r\n" + secret + b"\r\nContent-Length: %d\r\n\r\n"
            stalled = _open(url, 1, send=head % (len(content) + 50) + content)[0]
            assert _answer(stalled).startswith(b"HTTP/1.1 408")
        wait_for(lambda: httpx.get(f"{url}/metrics", timeout=30).text.count('status="4xx"') >= 2,
                 message="the stalled requests counted")
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert 'status="5xx"' not in metrics, [line for line in metrics.splitlines() if "5xx" in line]
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]


async def test_at_the_cap_busy_connections_stay_and_a_newcomer_is_told_why(tmp_path):
    with running_server(tmp_path, limits=ConnectionLimits(max_connections=2)) as url:
        async with connect(ws_url(url, "/ws/watch")), connect(ws_url(url, "/ws/watch")):
            resp = httpx.get(f"{url}/healthz", timeout=30)
            assert resp.status_code == 503 and "server busy: 2 connections open" in resp.text
        assert wait_for(lambda: httpx.get(f"{url}/healthz", timeout=30).status_code == 200)


async def test_watchers_are_capped(tmp_path):
    with running_server(tmp_path, limits=ConnectionLimits(max_watchers=2)) as url:
        async with connect(ws_url(url, "/ws/watch")), connect(ws_url(url, "/ws/watch")) as second:
            async with connect(ws_url(url, "/ws/watch")) as third:
                code, reason = await close_of(third)
            assert code == CLOSE_TOO_MANY and "2 watchers" in reason
            await second.close()
            fanout = url.app.state.nissa.fanout
            wait_for(lambda: len(fanout.watchers) == 1, message="a watcher gone")
            async with connect(ws_url(url, "/ws/watch")):
                wait_for(lambda: len(fanout.watchers) == 2, message="a watcher back")


async def test_a_silent_ingest_connection_is_closed(tmp_path):
    with running_server(tmp_path, limits=ConnectionLimits(ingest_idle_s=0.3)) as url:
        async with IngestClient(url, "quiet") as client:
            code, reason = await close_of(client.ws)
        assert code == CLOSE_IDLE and "no frame for 0.3 s" in reason
        # Frames coming more often than that keep it open, however long it lasts; silence then closes it.
        async with IngestClient(url, "talks") as client:
            for seq in range(1, 7):
                await client.send(events_for("talks", 1, start_seq=seq))
                await client.wait_ack(seq)
                await asyncio.sleep(0.1)
            code, reason = await close_of(client.ws)
        assert code == CLOSE_IDLE


@pytest.mark.parametrize("change", [{"header_timeout_s": 0}, {"min_body_rate": 0}, {"max_connections": 0},
                                    {"max_watchers": 0},
                                    {"write_buffer_bytes": 0}, {"close_grace_s": -1}])
def test_invalid_limits(change):
    with pytest.raises(ValueError, match=next(iter(change))):
        ConnectionLimits(**change)


async def test_websockets_that_never_say_hello_cannot_hold_the_slots(tmp_path):
    with running_server(tmp_path, limits=ConnectionLimits(max_connections=20)) as url:
        silent = [await connect(ws_url(url, "/ws/ingest")) for _ in range(20)]
        try:
            for _ in range(3):
                assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
            async with IngestClient(url, "newcomer") as trainer:  # a trainer gets in, and keeps its slot
                await trainer.send(events_for("newcomer", 2))
                assert await trainer.wait_ack(2) == 2
                for _ in range(25):
                    assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
                await trainer.send(events_for("newcomer", 3)[2:])
                assert await trainer.wait_ack(3) == 3
        finally:
            for ws in silent:
                await ws.close()
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert 'nissa_connections_refused_total{reason="displaced"}' in metrics
