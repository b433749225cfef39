"""The web page's tests: the system's Chromium (driven by Playwright), a page that lets only the server's
requests through, and a trainer rank that feeds a run while the page watches."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import urllib.parse
from collections.abc import Iterator

import pytest

from leyline import RunStarted, make_event
from leyline.esper import EpochCompleted, PPOUpdate, SeedFossilized
from tests.support.clients import IngestClient

CHROMIUM = os.environ.get("NISSA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def chromium() -> Iterator:
    """A headless Chromium for a fixture to yield (the test is skipped where there is none)."""
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (make install puts Debian's there: apt-get install chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


class Feed:
    """A trainer rank on its own thread and loop: stays connected (the run is live) while the page watches;
    ``with Feed(...) as feed`` disconnects it at the end of the block."""

    def __init__(self, url, run_id, token=None, ts=1.7e9):
        """``ts``: the time of its first event (one second apart after it)."""
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = IngestClient(url, run_id, token=token)
        self.run_id, self.seq, self.ts = run_id, 0, ts
        self._call(self.client.__aenter__())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def start(self, config):
        """The run's ``run_started``, with ``config`` (else ``epochs`` sends one of an Esper PPO run)."""
        self._call(self._send([self._event(RunStarted(name=self.run_id, config=config), 0)]))

    def epochs(self, first, n, acc=0.3, ppo=True):
        events = []
        if self.seq == 0:
            events.append(self._event(RunStarted(name=self.run_id, config={"policy": "ppo", "lr": acc}), 0))
        for i in range(first, first + n):
            events.append(self._event(EpochCompleted(round=i // 4, accuracy=acc + i / 100, val_loss=1.0), i, env=0))
            if ppo:
                events.append(self._event(PPOUpdate(round=i // 4, policy_loss=0.1 / (i + 1), value_loss=0.5,
                                                    entropy={"op": 1.0},
                                                    approx_kl=0.01, clip_fraction=0.1, explained_variance=0.5,
                                                    ratio_min=0.9, ratio_max=1.1, grad_norm=1.0, update_epochs=4), i))
            if i == 5:
                events.append(self._event(SeedFossilized(slot="r0c0", seed_id="s1", blueprint="conv", params=9), i))
        self._call(self._send(events))

    def send(self, items):
        """Events of ``(payload, epoch, env)``, their step 16 a epoch, as ``epochs`` sends them."""
        self._call(self._send([self._event(payload, i, env=env) for payload, i, env in items]))

    def _event(self, payload, i, env=None):
        self.seq += 1
        return make_event(payload, run_id=self.run_id, seq=self.seq, ts=self.ts + self.seq, step=16 * i, epoch=i,
                          env=env)

    async def _send(self, events):
        await self.client.send(events)
        await self.client.wait_ack(events[-1].seq)

    def close(self):
        self._call(self.client.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def open_page(browser, base):
    """A page that lets only requests to the server through, and records any other it was asked for (and the
    script errors it met): ``(page, outside, errors)``."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    outside, errors = [], []
    host = urllib.parse.urlsplit(base).hostname

    def only_ours(route):
        if urllib.parse.urlsplit(route.request.url).hostname == host:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_ours)
    page.on("pageerror", lambda err: errors.append(str(err)))
    return page, outside, errors


def chart_titles(page):
    """The titles of the charts the page shows, in its order."""
    return page.locator(".chart").evaluate_all("els => els.filter(e => !e.hidden).map(e => e.dataset.title)")
