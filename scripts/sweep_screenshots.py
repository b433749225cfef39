"""Regenerate the sweep's screenshots from real runs: three runs of ``examples/plain_loop.py`` with
different ``--lr`` in one group, then the web page's runs table sorted by best ``val_loss``
(``web-runs.png``), the group's chart with its band (``web-group.png``), the parallel coordinates of the
three runs (``web-parcoords.png``), and the console's table grouped by learning rate (``runs-table.svg``).

    python scripts/sweep_screenshots.py [--steps 300] [--out docs/screenshots]
"""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from demo import scratch_server, screenshot_args  # noqa: E402  (scripts/ is the script's directory)

ROOT = pathlib.Path(__file__).resolve().parents[1]
RATES = ("0.001", "0.01", "0.1")


def _train(url: str, work: pathlib.Path, steps: int, env: dict[str, str]) -> None:
    for lr in RATES:
        subprocess.run([sys.executable, str(ROOT / "examples" / "plain_loop.py"), "--server", url, "--log-dir",
                        str(work), "--run-name", f"lr{lr}", "--lr", lr, "--steps", str(steps),
                        "--project", "tour", "--group", "lr-sweep"], check=True, stdout=subprocess.DEVNULL, env=env)


def _web(url: str, out: pathlib.Path, chromium: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1500, "height": 700})
        page.goto(f"{url}/ui")
        page.wait_for_selector('#runs th[data-key="val_loss.best"]')
        page.click('#runs th[data-key="val_loss.best"]')
        page.wait_for_selector('#runs th[data-key="val_loss.best"]:has-text("▲")')
        page.wait_for_timeout(300)
        page.screenshot(path=str(out / "web-runs.png"), full_page=True)
        for row in page.locator("#runs tbody tr input").all():
            row.check()
        page.click("#show-parcoords")
        page.select_option("#parcoords-metric", label="val_loss.best")
        page.wait_for_selector('#parcoords[data-lines="3"]')
        page.locator("#parcoords-view").screenshot(path=str(out / "web-parcoords.png"))
        page.select_option("#group-by", "group")
        page.wait_for_selector("#runs tr.group a.bands")
        page.click("#runs tr.group a.bands")
        page.wait_for_selector('#group-charts[data-ready="1"]')
        page.wait_for_timeout(500)
        page.screenshot(path=str(out / "web-group.png"), full_page=True)
        browser.close()


async def _console(url: str, out: pathlib.Path) -> None:
    from tui.app import EsperWatch
    from tui.client import ClientConfig
    from tui.config import WatchConfig
    from tui.screens.run_picker import RunPickerScreen

    app = EsperWatch(WatchConfig(client=ClientConfig(url), runs_poll_s=0.2))
    async with app.run_test(size=(120, 16)) as pilot:
        for _ in range(100):
            await pilot.pause(0.1)
            if isinstance(app.screen, RunPickerScreen) and len(app.screen.order) == len(RATES):
                break
        picker = app.screen
        assert isinstance(picker, RunPickerScreen)
        await pilot.press("u")  # by group: the sweep's row
        for _ in range(100):
            await pilot.pause(0.1)
            if picker.data.groups is not None and picker.data.groups.groups:
                break
        await pilot.press("enter")  # open it: its three runs under it
        for _ in range(100):
            await pilot.pause(0.1)
            if len(picker.order) == 1 + len(RATES):
                break
        app.save_screenshot(str(out / "runs-table.svg"))


def main() -> int:
    args, chromium = screenshot_args("sweep_screenshots", __doc__ or "")
    out = pathlib.Path(args.out)
    with scratch_server() as (work, env, url):
        _train(url, work, args.steps, env)
        _web(url, out, chromium)
        asyncio.run(_console(url, out))
    print(f"wrote {out}/web-runs.png, web-group.png, web-parcoords.png, runs-table.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
