"""``esper-watch --web``: the console served to a browser, announced once its socket listens."""

from __future__ import annotations

import asyncio
import pathlib
import signal
from collections.abc import Callable

from aiohttp import web
from textual_serve.server import Server

WEB_TEMPLATES = pathlib.Path(__file__).resolve().parent / "web"
"""The page ``--web`` serves: textual-serve's own loads its font from a CDN, this one from the server."""


class WebConsole(Server):
    """textual-serve's server, saying where it serves only after the bind: a browser opened on the line is let in."""

    def __init__(self, command: str, *, host: str, port: int, public_url: str | None,
                 announce: Callable[[], None]) -> None:
        super().__init__(command, host=host, port=port, title="esper-watch", public_url=public_url,
                         templates_path=WEB_TEMPLATES)
        self._announce = announce

    async def on_startup(self, app: web.Application) -> None:
        """textual-serve prints its banner here, before the bind; the announcement waits for the bind instead."""

    def serve(self, debug: bool = False) -> None:
        """Serve until SIGINT/SIGTERM; ``announce`` runs once the socket listens (aiohttp's own hook for it)."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_exit)
        # run_app closes the loop when it ends.
        web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop,
                    print=lambda _banner: self._announce())
