"""Where a chart screen's data comes from over the network: each run found and followed (its live stream
opened before its history is read, so nothing falls between the two) and the history of every wanted series
fetched, a run at a time. The screen (``ChartScreen``) handles the messages these post."""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING, cast

from textual import work

from leyline.frames import EventBatch
from tui.client import ApiError, Connection, WatchStream
from tui.screens.chart_messages import HistoryDue, HistoryLoaded, MarkersLoaded, RunKnown, SeriesEvents

if TYPE_CHECKING:
    from textual.screen import Screen

    from tui.app import EsperWatch
    from tui.chart_data import SeriesSet

    _Host = Screen[None]  # what the mixin is mixed into, for the checker (its notify, post_message)
else:
    _Host = object

MAX_POINTS = 2000
RUNNING = ("live", "degraded")


def retryable(err: ApiError) -> bool:
    """A read that may be answered if asked again: the server unreachable or slow (0), busy (429), failing (5xx)."""
    return err.status in (0, 429) or err.status >= 500


class ChartFeed(_Host):
    """The network side of ``ChartScreen`` (a mixin: it uses the screen's app, data and messages)."""

    data: SeriesSet
    _asked: set[tuple[str, str]]
    _fetching: set[str]
    _told: set[str]
    """Runs whose history could not be read, said once (it is asked again)."""

    def _say_failed(self, what: str, err: ApiError) -> None:
        """A read that failed, in a notification: with that it is asked again where it is."""
        self.notify(f"{what}: {err.reason}" + (" (asking again)" if retryable(err) else ""), severity="error")

    @property
    def watch_app(self) -> EsperWatch:
        return cast("EsperWatch", self.app)

    @work(group="follow")
    async def follow(self, run_id: str) -> None:
        """Find the run, then (live) open its stream from the last stored event before reading history,
        so that nothing falls between the two; a finished run needs only its history."""
        client = self.watch_app.require_client()
        while True:
            try:
                run = await client.get_run(run_id)
                break
            except ApiError as err:
                if err.status not in (0, 404):
                    self.notify(f"run {run_id}: {err.reason}", severity="error")
                    return
                await asyncio.sleep(self.watch_app.config.runs_poll_s)
        names: list[str] | None = None
        for attempt in itertools.count():
            try:
                names = await client.series_names(run_id)
                break
            except ApiError as err:
                if err.status == 404:
                    break  # a server without the series API: every event comes through the stream
                if not retryable(err) or attempt == 0:
                    self._say_failed(f"series of {run_id}", err)
                if not retryable(err):
                    return
                await asyncio.sleep(self.watch_app.config.runs_poll_s)
        # Through messages, in order: the names are wanted before any history is asked for.
        self.post_message(RunKnown(run, names))
        if run.status not in RUNNING and names is not None:
            self.post_message(HistoryDue(run_id))
            return
        stream = WatchStream(client.config, run_id, after_seq=run.rank0_seq if names is not None else 0)
        async for item in stream:
            if isinstance(item, EventBatch):
                if item.events:
                    self.post_message(SeriesEvents(run_id, item.events))
            elif isinstance(item, Connection) and item.state == "connected" and names is not None:
                self.post_message(HistoryDue(run_id))
            elif isinstance(item, Connection) and item.state == "unauthorized":
                self.notify(f"the server refused the stream: {item.detail}", severity="error")

    @work(group="history")
    async def fetch_history(self, run_id: str) -> None:
        """Every wanted series the run has no history of yet (one read at a time per run)."""
        if run_id in self._fetching:
            return
        self._fetching.add(run_id)
        client = self.watch_app.require_client()
        markers_asked, unread = False, []
        try:
            while True:
                # Checked again after every read: a series wanted meanwhile (its call found this one running
                # and left) is read here, markers' read included.
                names = [n for n in self.data.needs_history(run_id) if (run_id, n) not in self._asked]
                unread = list(names)
                for name in names:
                    self._asked.add((run_id, name))
                    axis = self.data.axis
                    series = await client.series(run_id, name, axis, MAX_POINTS)
                    self.post_message(HistoryLoaded(run_id, name, axis, series))
                    unread.remove(name)
                if names:
                    continue
                if markers_asked or run_id in self.data.markers:
                    break
                markers_asked = True
                self.post_message(MarkersLoaded(run_id, await client.markers(run_id)))
        except ApiError as err:
            if retryable(err):  # asked again in a while: a busy or restarting server loses none of it
                self._asked -= {(run_id, n) for n in unread}
                self.set_timer(self.watch_app.config.runs_poll_s, lambda: self.fetch_history(run_id))
            if not retryable(err) or run_id not in self._told:  # said once: not again at every try
                self._told.add(run_id)
                self._say_failed(f"history of {run_id}", err)
        finally:
            self._fetching.discard(run_id)

