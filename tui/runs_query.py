"""What the runs table asks the server for: a page of runs in the server's order and filter, or the rows of
groups with the runs of the groups opened (each a page of its own). Never every run."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from leyline.groups import GroupRow, GroupsReply
from leyline.payloads import Scalar
from leyline.runs import RunSummary
from tui.client import NissaClient

PAGE = 100
"""Runs a page of the table holds."""
GROUP_PAGE = 50
"""Runs shown under an opened group."""


def value_id(value: Scalar) -> str:
    """A group's value as an id (1 and 1.0 and True told apart)."""
    return msgspec.json.encode(value).decode()


@dataclass(frozen=True)
class TableQuery:
    q: str = ""
    sort: str = ""
    offset: int = 0
    group_by: str | None = None
    metrics: tuple[str, ...] = ()
    """The metric columns (``val_loss.best``) a group's row summarises."""
    opened: frozenset[str] = frozenset()
    """Groups whose runs are shown (``value_id`` of each)."""


@dataclass
class TableData:
    query: TableQuery
    runs: list[RunSummary] = field(default_factory=list)
    """The page of runs (no grouping), or every opened group's runs one after the other."""
    total: int = 0
    groups: GroupsReply | None = None
    members: dict[str, list[RunSummary]] = field(default_factory=dict)
    """The runs shown under each opened group."""


def _joined(q: str, term: str) -> str:
    return f"{q} {term}".strip()


async def fetch(client: NissaClient, query: TableQuery) -> TableData:
    if query.group_by is None:
        page = await client.runs_page(PAGE, query.offset, query.q, query.sort)
        return TableData(query, page.runs, page.total)
    groups = await client.run_groups(query.group_by, query.q, list(query.metrics))
    data = TableData(query, total=groups.runs, groups=groups)
    for row in groups.groups:
        if value_id(row.value) in query.opened:
            data.members[value_id(row.value)] = await _members(client, query, row)
    data.runs = [r for runs in data.members.values() for r in runs]
    return data


async def _members(client: NissaClient, query: TableQuery, row: GroupRow) -> list[RunSummary]:
    term = row.filter
    if term is None:  # runs without the key: no clause names them
        return []
    return (await client.runs_page(GROUP_PAGE, 0, _joined(query.q, term), query.sort)).runs
