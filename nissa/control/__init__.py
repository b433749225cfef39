"""Control of a live run: telemetry levels with temporary DEBUG windows, and the command processor."""

from nissa.control.commands import (
    CommandContext,
    CommandHandler,
    CommandProcessor,
    CommandRejected,
    UnavailableHandler,
)
from nissa.control.debug import PROFILE_UNAVAILABLE, DebugHandler
from nissa.control.levels import LevelController

__all__ = [
    "CommandContext",
    "CommandHandler",
    "CommandProcessor",
    "CommandRejected",
    "DebugHandler",
    "LevelController",
    "PROFILE_UNAVAILABLE",
    "UnavailableHandler",
]
