"""A JSON webhook receiver on 127.0.0.1 (``http.server`` in a thread): what an alert destination such as
``json://127.0.0.1:PORT/hook`` delivers to, recorded with the time each request arrived."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Received:
    """Requests the receiver got: (arrival time, JSON body) each; ``fail_first`` answers 500 that many times."""

    fail_first: int = 0
    posts: list[tuple[float, dict]] = field(default_factory=list)
    refused: int = 0
    url: str = ""
    cond: threading.Condition = field(default_factory=threading.Condition)

    def wait(self, predicate, timeout: float = 30.0) -> list[tuple[float, dict]]:
        with self.cond:
            if not self.cond.wait_for(lambda: predicate([b for _, b in self.posts]), timeout=timeout):
                raise AssertionError(f"webhook: not received within {timeout} s; got {self.posts}")
            return list(self.posts)


@contextlib.contextmanager
def webhook_receiver(fail_first: int = 0) -> Iterator[Received]:
    received = Received(fail_first=fail_first)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            with received.cond:
                if received.refused < received.fail_first:
                    received.refused += 1
                    self.send_response(500)
                    self.end_headers()
                    return
                received.posts.append((time.time(), json.loads(body)))
                received.cond.notify_all()
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True)
    thread.start()
    received.url = f"json://127.0.0.1:{server.server_address[1]}/hook"
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
