"""Importing the history people have: TensorBoard event directories and CSV files become runs on a server.

Each source becomes a run log written here first (``<log_dir>/<run_id>/events.jsonl``, with its stream
secret), then uploaded as a run logged without a server is (``nissa.upload``). Run ids and every event's
``seq`` follow from the source alone, so a second import of the same source writes the same log and the
server, which holds it already, changes nothing.
"""

from nissa.importer.runs import ImportedRun, import_runs

__all__ = ["ImportedRun", "import_runs"]
