"""A run's id: the rule every package checks one by (here, below the event and command types that carry it)."""

from __future__ import annotations

from typing import Annotated

import msgspec

# ``$(?!\n)``: a plain ``$`` would also match before a final newline. A run id names a directory
# (``<log-dir>/<run_id>/``): no separator, and not ``.``, ``..`` or any other name made of dots only. It lands
# in CSV files and spreadsheets: it may not start with what one reads as a formula (of ``= + - @`` only ``-``
# is in the alphabet at all).
RUN_ID_PATTERN = r"^(?!\.+$)(?!-)[A-Za-z0-9._:-]+$(?!\n)"
MAX_RUN_ID = 128
RUN_ID_RULE = (f"1 to {MAX_RUN_ID} letters, digits, '.', '_', ':' or '-', not dots only, and not starting with '-' "
               f"(a spreadsheet reads it as a formula)")
"""The ``RunId`` rule in words, for the messages that refuse one."""
RunId = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_RUN_ID, pattern=RUN_ID_PATTERN,
                                    description=f"A run id: {RUN_ID_RULE}.")]
