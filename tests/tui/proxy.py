"""A loopback TCP relay that a test can cut, to break the console's connections mid-stream."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class CuttableProxy:
    """Relays 127.0.0.1:<port> to the target; ``cut()`` drops every open connection at once."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.connections = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.connections += 1
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass  # the other side went away; closing below is all there is to do
        finally:
            self._writers.discard(writer)
            writer.close()

    def cut(self) -> None:
        for writer in list(self._writers):
            transport = writer.transport
            transport.abort()  # a reset, not a polite close: what a dropped network looks like
        self._writers.clear()

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@contextlib.asynccontextmanager
async def cuttable_proxy(url: str) -> AsyncIterator[tuple[CuttableProxy, str]]:
    """``(proxy, proxied_url)`` for an ``http://host:port`` server URL."""
    host, port = url.split("://", 1)[1].rstrip("/").rsplit(":", 1)
    proxy = CuttableProxy(host, int(port))
    await proxy.start()
    try:
        yield proxy, f"http://127.0.0.1:{proxy.port}"
    finally:
        await proxy.close()
