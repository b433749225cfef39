"""A scripted trainer for the console's tests: a real websocket client on ``/ws/ingest``.

It says ``hello``, sends ``events`` batches, reads acks, and answers each command the server sends
down the way a trainer does (delivered → applied at a step → completed, with the level change of a
debug window), so the console sees a command's whole lifecycle through the real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from leyline import (
    CommandStatus,
    CommandStatusChanged,
    DebugRequest,
    Event,
    Payload,
    ProfileRequest,
    StacksRequest,
    TelemetryLevel,
    TelemetryLevelChanged,
    decode_frame,
    encode,
    make_event,
)
from leyline.commands import Command
from leyline.frames import PROTOCOL, Ack, CommandFrame, EventBatch, Hello, Welcome
from tests.support import SECRET


class ScriptedTrainer:
    """One run and rank: seq counts up from 1 across everything it sends."""

    def __init__(self, ws: ClientConnection, run_id: str, answer_commands: bool, rank: int = 0) -> None:
        self.ws = ws
        self.run_id = run_id
        self.rank = rank
        self.answer_commands = answer_commands
        self.seq = 0
        self.step = 0
        self.epoch = 0
        self.acked = 0
        self.commands: list[Command] = []
        self._acked = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None

    def event(self, payload: Payload, env: int | None = None) -> Event:
        self.seq += 1
        return make_event(payload, run_id=self.run_id, seq=self.seq, ts=time.time(), step=self.step,
                          epoch=self.epoch, env=env, rank=self.rank)

    async def send(self, events: list[Event], batch: int = 500) -> None:
        """Send events (their seq must continue this trainer's) and wait until the server stored them."""
        for i in range(0, len(events), batch):
            await self.ws.send(encode(EventBatch(events=events[i:i + batch])).decode())
        if events:
            last = events[-1]
            self.seq, self.step = max(self.seq, last.seq), max(self.step, last.step)
            self.epoch = max(self.epoch, last.epoch)
            await self.wait_acked(last.seq)

    async def emit(self, *payloads: Payload) -> None:
        await self.send([self.event(p) for p in payloads])

    async def wait_acked(self, seq: int, timeout: float = 30.0) -> None:
        async with self._acked:
            await asyncio.wait_for(self._acked.wait_for(lambda: self.acked >= seq), timeout)

    async def _read(self) -> None:
        async for raw in self.ws:
            frame = decode_frame(raw)
            if isinstance(frame, Ack):
                async with self._acked:
                    self.acked = max(self.acked, frame.seq)
                    self._acked.notify_all()
            elif isinstance(frame, CommandFrame):
                self.commands.append(frame.command)
                if self.answer_commands:
                    asyncio.get_running_loop().create_task(self._apply(frame.command))

    async def _apply(self, command: Command) -> None:
        """What a trainer does with a command at its next step boundaries."""
        def status(s: CommandStatus, **kw: object) -> CommandStatusChanged:
            return CommandStatusChanged(command_id=command.command_id, action=command.action, status=s, **kw)  # type: ignore[arg-type]

        await self.emit(status(CommandStatus.DELIVERED))
        self.step += 10
        request = command.request
        if isinstance(request, DebugRequest):
            await self.emit(
                status(CommandStatus.APPLIED, applied_step=self.step),
                TelemetryLevelChanged(level=TelemetryLevel.DEBUG, previous=TelemetryLevel.NORMAL,
                                      reason="command", until_epoch=self.epoch + (request.epochs or 1),
                                      command_id=command.command_id),
            )
            await self.emit(
                TelemetryLevelChanged(level=TelemetryLevel.NORMAL, previous=TelemetryLevel.DEBUG,
                                      reason="window ended", command_id=command.command_id),
                status(CommandStatus.COMPLETED, result={"epochs": request.epochs or 1}),
            )
        elif isinstance(request, StacksRequest):  # answered at once, the step where it is
            self.step -= 10
            await self.emit(status(CommandStatus.APPLIED, applied_step=self.step))
            stacks = 'Thread 0x1 "MainThread" (most recent call last):\n  File "ranks.py", line 9, in _collective\n'
            await self.emit(status(CommandStatus.COMPLETED, applied_step=self.step,
                                   result={"threads": 1, "rank": self.rank, "stacks": stacks}))
        else:
            await self.emit(status(CommandStatus.APPLIED, applied_step=self.step))
            batches = request.batches if isinstance(request, ProfileRequest) else None
            await self.emit(status(CommandStatus.COMPLETED, result={"batches": batches or 0}))


@contextlib.asynccontextmanager
async def scripted_trainer(server_url: str, run_id: str, *, name: str = "scripted", token: str | None = None,
                           answer_commands: bool = True, rank: int = 0) -> AsyncIterator[ScriptedTrainer]:
    """Connect, say hello, and keep reading acks and commands until the block ends."""
    ws_url = server_url.replace("http://", "ws://", 1).rstrip("/") + "/ws/ingest"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # A hub tries again and again; this stand-in connects once: it waits as long as a loaded machine may take.
    async with connect(ws_url, additional_headers=headers, max_size=None, open_timeout=60) as ws:
        hello = Hello(run_id=run_id, rank=rank, name=name, last_seq=0, secret=SECRET, protocol=PROTOCOL)
        await ws.send(encode(hello).decode())
        welcome = decode_frame(await asyncio.wait_for(ws.recv(), 30))
        assert isinstance(welcome, Welcome), welcome
        trainer = ScriptedTrainer(ws, run_id, answer_commands, rank)
        trainer.seq = welcome.last_seq
        trainer._reader = asyncio.create_task(trainer._read())
        try:
            yield trainer
        finally:
            trainer._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                await trainer._reader
