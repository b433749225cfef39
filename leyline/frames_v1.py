"""Protocol 1's ``command`` frame, for an ingest peer from before protocol 2 (``leyline.frames``): the command
flat, its request's fields beside its id (``{"command_id", "run_id", "action", "epochs", …, "created_at"}``).
A server writes it to a trainer of protocol 1; a trainer reads it from a server of protocol 1.
"""

from __future__ import annotations

from typing import Any

import msgspec

from leyline.commands import Command, from_flat
from leyline.frames import Ack, CommandFrame, Welcome


def encode_command(command: Command) -> bytes:
    """``command`` as protocol 1's frame: the request's fields (its ``action`` among them), its id and time."""
    flat = {**msgspec.to_builtins(command.request), "command_id": command.command_id,
            "created_at": command.created_at}
    return msgspec.json.encode({"type": "command", "command": flat})


class _FlatFrame(msgspec.Struct, tag="command", tag_field="type"):
    command: dict[str, Any]


class _Head(msgspec.Struct):
    command_id: str
    created_at: float = 0.0


_server_frames = msgspec.json.Decoder(Welcome | Ack | _FlatFrame)


def decode_server_frame(data: bytes | str) -> Welcome | Ack | CommandFrame:
    """A frame from a server of protocol 1, its command made typed (the fields of other actions a flat command
    carries at their defaults left out); a ``ValidationError`` where it holds no valid request."""
    frame = _server_frames.decode(data)
    if not isinstance(frame, _FlatFrame):
        return frame
    head = msgspec.convert(frame.command, _Head)
    return CommandFrame(command=Command(command_id=head.command_id, request=from_flat(frame.command),
                                        created_at=head.created_at))
