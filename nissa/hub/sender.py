"""The hub's websocket sender: streams the run log to ``/ws/ingest`` and reconnects forever.

One session: ``hello`` → ``welcome(last_seq)`` → events from ``last_seq + 1`` straight out
of the log (lines are already encoded envelopes, so a frame is a join, not a re-encode) →
``ack(seq)`` frames move the acknowledged mark. A receiver thread per session reads acks and
commands, and drops a connection whose acks have stalled. Any failure ends the session; the next
one goes to the next server of the list at once, and once every server has failed in a row, after
a capped, jittered exponential backoff.
"""

from __future__ import annotations

import functools
import logging
import pathlib
import random
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Protocol

import msgspec
from websockets.exceptions import ConnectionClosed, InvalidMessage, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from leyline import Command, decode_frame, encode, frames_v1
from leyline.frames import (
    CLOSE_CONFLICT,
    CLOSE_DELETED,
    CLOSE_FORBIDDEN,
    CLOSE_UNAUTHORIZED,
    MAX_FRAME_BYTES,
    PROTOCOL,
    Ack,
    CommandFrame,
    Hello,
    Welcome,
)
from nissa.hub.config import HubConfig
from nissa.hub.pacing import Gathering, backoff_delay
from nissa.hub.ratelog import RateLimitedLog
from nissa.hub.runlog import LogReader
from nissa.hub.stats import HubStats

logger = logging.getLogger(__name__)

_FRAME_HEAD = b'{"type":"events","events":['
_FRAME_TAIL = b"]}"
_RECV_TICK_S = 0.5


class ProtocolViolation(Exception):
    """The server answered with a frame the protocol does not allow at that point."""


class LogSource(Protocol):
    """What the sender reads: a log's path, sparse index and committed (last seq, end offset)."""

    path: pathlib.Path
    index: list[int]
    committed: tuple[int, int]


_FINAL_CODES = (CLOSE_FORBIDDEN, CLOSE_CONFLICT, CLOSE_DELETED)


def _close_code(err: BaseException) -> int | None:
    return err.rcvd.code if isinstance(err, ConnectionClosed) and err.rcvd is not None else None


def is_refusal(err: BaseException) -> bool:
    """The server said no to this client (auth, the run's stream), not "not now"."""
    if isinstance(err, InvalidStatus):
        return err.response.status_code in (401, 403)
    return _close_code(err) in (CLOSE_UNAUTHORIZED, *_FINAL_CODES)


def is_final(err: BaseException) -> bool:
    """A refusal no retry can change: the run's stream belongs to another secret, the server holds
    other events under this log's seqs, or the run was deleted there. A token, by contrast, may be fixed on the
    server meanwhile."""
    return _close_code(err) in _FINAL_CODES


def describe_error(err: BaseException) -> str:
    if isinstance(err, ConnectionClosed) and err.rcvd is not None:
        return f"closed by server: {err.rcvd.code} {err.rcvd.reason}".strip()
    if isinstance(err, InvalidStatus):
        # nissa-server refuses a token after the handshake (close 4401): a 403 or 404 here is no ingest at that
        # path, as when the URL names a page (http://host:8765/ui) instead of the server.
        hint = (" (no nissa-server ingest at that URL: give the server's address, http://host:port)"
                if err.response.status_code in (403, 404) else "")
        return f"handshake refused: HTTP {err.response.status_code}{hint}"
    if isinstance(err, InvalidMessage):  # something answered, but not with HTTP a websocket can start from
        return f"{type(err).__name__}: {err} (is it a nissa-server?)"
    return f"{type(err).__name__}: {err}"


class Sender:
    """Streams one log to the server in a named daemon thread until stopped."""

    def __init__(self, config: HubConfig, source: LogSource, stats: HubStats, cv: threading.Condition,
                 on_command: Callable[[Command], None], *, secret: str, upload: bool = False,
                 give_up_when_refused: bool = False) -> None:
        assert config.ws_url is not None
        self._cfg = config
        self._urls = config.ws_urls
        self._url = self._urls[0]
        self._source = source
        self._stats = stats
        self._cv = cv
        self._on_command = on_command
        self._stop = threading.Event()
        self._nudge = threading.Event()  # cuts a backoff wait short (stop, or a final drain)
        self._rng = random.Random()
        self._ratelog = RateLimitedLog(logger)
        self._thread = threading.Thread(target=self._run, name=f"nissa-hub-sender-r{config.rank}", daemon=True)
        self._sock: socket.socket | None = None  # held from the TCP connect on, so stop() can cut a handshake
        self._decode: Callable[[bytes | str], object] = decode_frame
        """Reads the server's frames: as its protocol writes them (its welcome says which)."""
        self._session_error: BaseException | None = None
        self._attempting = False
        """A connection is being made (TCP, handshake, welcome): its outcome is not known yet."""
        self._failed = 0
        """Sessions that ended in an error (an attempt that failed counts): evidence that the server is away."""
        self._unacked_since = 0.0
        self._sent_upto = 0
        self._secret = secret
        self._upload = upload
        self._give_up_when_refused = give_up_when_refused
        self.refused: str | None = None
        """Why the server refused this hub (a bad token, another run's secret), once it has."""

    def start(self) -> None:
        self._thread.start()

    # --- called from other threads --------------------------------------------------------------

    def wait_acked(self, seq: int, timeout: float) -> bool:
        """Block until the server has stored everything up to ``seq``, or ``timeout`` passes."""
        with self._cv:
            return self._cv.wait_for(lambda: self._stats.acked >= seq, timeout=max(0.0, timeout))

    def drain(self, seq: int, timeout: float, offline_grace: float) -> bool:
        """Like ``wait_acked``, but gives up once the server has stayed away for ``offline_grace``.

        "Away" begins with an attempt that failed, not with "not connected": a first connection whose welcome is
        slow (a loaded server) is waited for, up to ``connect_timeout_s``. While the server is away the backoff is
        cut short every tick: a server back within the grace is found at once, not after a reconnect delay grown
        long while it was down. Once the grace is over, an attempt already under way may end; none is begun.
        """
        deadline = time.monotonic() + timeout
        failed_before = self._failed
        offline_since: float | None = None
        last_try: int | None = None  # failures counted when the grace ended: the attempt then under way may end
        while True:
            now = time.monotonic()
            if self._stats.acked >= seq:
                return True
            if not self._thread.is_alive():  # it gave up: the server refused the stream for good
                return False
            if self._stats.connected:
                offline_since, last_try, failed_before = None, None, self._failed
            elif self._failed > failed_before and offline_since is None:
                offline_since = now
            if offline_since is not None and now - offline_since > offline_grace:
                last_try = self._failed if last_try is None else last_try
                if not self._attempting or self._failed > last_try:
                    return False
            elif not self._stats.connected:
                self._nudge.set()
            if now >= deadline:
                return False
            self.wait_acked(seq, min(0.2, deadline - now))

    def stop(self, timeout: float) -> None:
        """Close the connection cleanly if it allows, else cut it; wait up to ``timeout`` for the thread."""
        deadline = time.monotonic() + timeout
        self._stop.set()
        self._nudge.set()
        with self._cv:
            self._cv.notify_all()
        self._thread.join(max(0.0, min(timeout / 2, 2.0)))
        sock = self._sock
        if self._thread.is_alive() and sock is not None:
            _shutdown(sock)
        self._thread.join(max(0.0, deadline - time.monotonic()))

    # --- the sender thread -----------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        reader = LogReader(self._source.path, self._source.index)
        try:
            while not self._stop.is_set():
                try:
                    self._session(reader)
                except (OSError, TimeoutError, WebSocketException, msgspec.DecodeError, ProtocolViolation) as err:
                    self._failed += 1
                    if self._stats.connected:
                        failures = 0  # the session had worked: start the backoff over
                    # The receiver's diagnosis (an ack stall, a close code) beats the send's echo of it.
                    self._stats.last_error = describe_error(self._session_error or err)
                    if is_refusal(self._session_error or err):
                        self.refused = self._stats.last_error
                        if self._give_up_when_refused or is_final(self._session_error or err):
                            logger.error("nissa hub: %s refused: %s; no more tries (events stay in %s)",
                                         self._url, self.refused, self._source.path)
                            break
                    if not self._stop.is_set():
                        self._ratelog.warning("session", "nissa hub: %s: %s; retrying (events stay in %s)",
                                              self._url, self._stats.last_error, self._source.path)
                finally:
                    self._stats.connected = self._attempting = False
                    self._sock = None
                self._nudge.wait(self._next_server(failures))
                self._nudge.clear()
                if self._stop.is_set():
                    break
                failures += 1
                self._stats.reconnects += 1
        finally:
            reader.close()

    def _next_server(self, failures: int) -> float:
        """Move on to the next server of the list; the delay before trying it (none until every
        server has failed in a row, then the backoff of that many rounds)."""
        turn = (self._urls.index(self._url) + 1) % len(self._urls)
        self._url = self._urls[turn]
        if (failures + 1) % len(self._urls):
            return 0.0
        return backoff_delay(self._cfg.backoff, failures // len(self._urls), self._rng)

    def _connect(self) -> ClientConnection:
        parts = urllib.parse.urlsplit(self._url)
        port = parts.port or (443 if parts.scheme == "wss" else 80)
        sock = socket.create_connection((parts.hostname, port), timeout=self._cfg.connect_timeout_s)
        self._sock = sock
        headers = {"Authorization": f"Bearer {self._cfg.token}"} if self._cfg.token else None
        try:
            return connect(self._url, sock=sock, additional_headers=headers,
                           open_timeout=self._cfg.connect_timeout_s, close_timeout=1.0, compression=None,
                           max_size=MAX_FRAME_BYTES, ping_interval=None)
        except BaseException:
            sock.close()
            raise

    def _handshake(self, conn: ClientConnection) -> int:
        cfg = self._cfg
        hello = Hello(run_id=cfg.run_id, rank=cfg.rank, name=cfg.name, last_seq=self._source.committed[0],
                      secret=self._secret, upload=self._upload, protocol=PROTOCOL)
        conn.send(encode(hello).decode())
        frame = decode_frame(conn.recv(timeout=cfg.connect_timeout_s))
        if not isinstance(frame, Welcome):
            raise ProtocolViolation(f"expected welcome, got {type(frame).__name__}")
        # A server of protocol 1 writes its commands flat: read as it writes them.
        self._decode = decode_frame if frame.protocol >= PROTOCOL else frames_v1.decode_server_frame
        return frame.last_seq

    def _session(self, reader: LogReader) -> None:
        self._attempting = True
        conn = self._connect()
        self._session_error = None
        with conn:
            server_last = self._handshake(conn)
            logged = self._source.committed[0]
            if server_last > logged:
                logger.warning("server holds seq %d but the log ends at %d; sending from %d",
                               server_last, logged, logged + 1)
            next_seq = min(server_last, logged) + 1
            self._sent_upto = next_seq - 1
            with self._cv:
                self._stats.acked = server_last
                self._stats.connected, self._attempting = True, False
                self._cv.notify_all()
            receiver = threading.Thread(target=self._receive, args=(conn,), daemon=True,
                                        name=f"nissa-hub-recv-r{self._cfg.rank}")
            receiver.start()
            try:
                self._stream(conn, reader, next_seq)
            finally:
                if self._stop.is_set() and self._session_error is None:
                    conn.close()  # a clean goodbye: the server sees a normal closure
                else:
                    self._abort(conn)
                receiver.join(timeout=5.0)
        if self._session_error is not None and not self._stop.is_set():
            raise self._session_error

    def _stream(self, conn: ClientConnection, reader: LogReader, next_seq: int) -> None:
        cfg = self._cfg
        gathering = Gathering(cfg.batch_events, cfg.send_linger_s, cfg.send_hold_s)
        while not self._stop.is_set() and self._session_error is None:
            committed = self._source.committed
            if next_seq <= committed[0] and next_seq - 1 - self._stats.acked < cfg.window_events:
                wait = gathering.wait_s(committed[0] - next_seq + 1, self._stats.acked)
                if wait > 0:
                    with self._cv:
                        self._cv.wait(timeout=wait)
                    continue
                lines = reader.read(next_seq, committed, cfg.batch_events, cfg.batch_bytes)
                if next_seq - 1 <= self._stats.acked:
                    self._unacked_since = time.monotonic()
                conn.send(b"".join((_FRAME_HEAD, b",".join(lines), _FRAME_TAIL)), text=True)
                next_seq += len(lines)
                self._sent_upto = next_seq - 1
                gathering.sent(self._sent_upto)
                self._stats.sent += len(lines)
                continue
            with self._cv:
                self._cv.wait_for(functools.partial(self._has_work, next_seq), timeout=1.0)

    def _has_work(self, next_seq: int) -> bool:
        if self._stop.is_set() or self._session_error is not None:
            return True
        return next_seq <= self._source.committed[0] and next_seq - 1 - self._stats.acked < self._cfg.window_events

    def _receive(self, conn: ClientConnection) -> None:
        try:
            while True:
                try:
                    raw = conn.recv(timeout=_RECV_TICK_S)
                except TimeoutError:
                    self._check_ack_stall()
                    continue
                self._handle(self._decode(raw))
        except (OSError, WebSocketException, msgspec.DecodeError, ProtocolViolation) as err:
            self._session_error = err
            self._abort(conn)  # the sender may be stuck in a send to this very peer
        finally:
            with self._cv:
                self._cv.notify_all()

    def _handle(self, frame: object) -> None:
        if isinstance(frame, Ack):
            with self._cv:
                if frame.seq > self._stats.acked:
                    self._stats.acked = frame.seq
                    self._unacked_since = time.monotonic()
                    self._cv.notify_all()
        elif isinstance(frame, CommandFrame):
            self._on_command(frame.command)
        else:
            raise ProtocolViolation(f"unexpected {type(frame).__name__} frame on ingest")

    def _check_ack_stall(self) -> None:
        if self._sent_upto > self._stats.acked and time.monotonic() - self._unacked_since > self._cfg.ack_timeout_s:
            raise TimeoutError(f"no ack for {self._cfg.ack_timeout_s:.0f} s")

    def _abort(self, conn: ClientConnection) -> None:
        _shutdown(conn.socket)


def _shutdown(sock: socket.socket) -> None:
    # shutdown() unblocks a send stuck on a peer that stopped reading; close() alone would wait.
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed: nothing left to unblock
