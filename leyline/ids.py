"""A run's id and an artifact's name: the rules every package checks them by (here, below the event and command
types that carry them)."""

from __future__ import annotations

from typing import Annotated

import msgspec

# ``$(?!\n)``: a plain ``$`` would also match before a final newline. A run id names a directory
# (``<log-dir>/<run_id>/``), an artifact a file: no separator, and not ``.``, ``..`` or any other name made of dots
# only. Either may land in a shell command (an option to it) or in a CSV file a spreadsheet opens (a formula to
# it): it may not start with '-' (of ``= + - @`` only ``-`` is in the alphabet at all).
_NAMES = r"^(?!\.+$)(?!-)"
_NAME_RULE = "not dots only, and not starting with '-'"

RUN_ID_PATTERN = _NAMES + r"[A-Za-z0-9._:-]+$(?!\n)"
MAX_RUN_ID = 128
RUN_ID_RULE = (f"1 to {MAX_RUN_ID} letters, digits, '.', '_', ':' or '-', {_NAME_RULE} (a spreadsheet reads it as "
               f"a formula)")
"""The ``RunId`` rule in words, for the messages that refuse one."""
RunId = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_RUN_ID, pattern=RUN_ID_PATTERN,
                                    description=f"A run id: {RUN_ID_RULE}.")]

WINDOWS_DEVICES = ("CON", "PRN", "AUX", "NUL", *(f"{port}{i}" for port in ("COM", "LPT") for i in range(10)))
"""Names Windows takes for a device, in any case and whatever extension follows: a file saved under one (an
artifact downloaded by its name) would write to the device."""
_NOT_A_DEVICE = "(?!(?:{})(?:\\.|$))".format("|".join(
    "".join(f"[{c}{c.lower()}]" if c.isalpha() else c for c in name) for name in WINDOWS_DEVICES))
ARTIFACT_NAME_PATTERN = _NAMES + _NOT_A_DEVICE + r"[A-Za-z0-9._-]+$(?!\n)"
MAX_ARTIFACT_NAME = 128
ARTIFACT_NAME_RULE = (f"1 to {MAX_ARTIFACT_NAME} letters, digits, '.', '_' or '-', {_NAME_RULE} (a command reads it "
                      f"as an option), and no Windows device name (CON, NUL, COM1…, with any extension)")
"""The ``ArtifactName`` rule in words, for the messages that refuse one."""
ArtifactName = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ARTIFACT_NAME, pattern=ARTIFACT_NAME_PATTERN,
                                           description=f"An artifact's name: {ARTIFACT_NAME_RULE}.")]
