"""An SMTP receiver on 127.0.0.1 (a ``socketserver`` in a thread, speaking just enough SMTP for a client that
sends one message without TLS or login): what an alert destination such as ``mailto://127.0.0.1:PORT`` delivers
to, each message kept whole as it came."""

from __future__ import annotations

import contextlib
import email
import email.message
import email.policy
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Mailbox:
    messages: list[email.message.EmailMessage] = field(default_factory=list)
    url: str = ""
    cond: threading.Condition = field(default_factory=threading.Condition)

    def wait(self, count: int = 1, timeout: float = 30.0) -> list[email.message.EmailMessage]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.messages) >= count, timeout=timeout):
                raise AssertionError(f"mailbox: {len(self.messages)} messages within {timeout} s, not {count}")
            return list(self.messages)


@contextlib.contextmanager
def smtp_receiver() -> Iterator[Mailbox]:
    box = Mailbox()

    class Handler(socketserver.StreamRequestHandler):
        def reply(self, line: str) -> None:
            self.wfile.write(line.encode() + b"\r\n")

        def handle(self) -> None:
            self.reply("220 127.0.0.1 ESMTP test")
            while line := self.rfile.readline():
                verb = line.decode(errors="replace").strip().split(" ", 1)[0].upper()
                if verb in ("EHLO", "HELO"):
                    self.reply("250 127.0.0.1")
                elif verb == "DATA":
                    self.reply("354 go on")
                    self.reply("250 kept" if self._message() else "451 cut")
                elif verb == "QUIT":
                    self.reply("221 bye")
                    return
                else:  # MAIL, RCPT, RSET, NOOP
                    self.reply("250 ok")

        def _message(self) -> bool:
            lines = []
            while (line := self.rfile.readline()) not in (b".\r\n", b""):
                lines.append(line[1:] if line.startswith(b"..") else line)
            message = email.message_from_bytes(b"".join(lines), policy=email.policy.default)
            with box.cond:
                box.messages.append(message)  # type: ignore[arg-type]
                box.cond.notify_all()
            return line == b".\r\n"

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="smtp-receiver", daemon=True)
    thread.start()
    box.url = (f"mailto://127.0.0.1:{server.server_address[1]}?mode=insecure"
               "&from=nissa@example.com&to=ops@example.com")
    try:
        yield box
    finally:
        server.shutdown()
        server.server_close()
