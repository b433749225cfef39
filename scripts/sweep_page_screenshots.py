"""Regenerate the screenshots of a sweep being watched: a real PBT sweep of ``examples/sweep_loop.py`` (4 trials,
an agent, exploits every 10 steps), then the web page's sweep page (``web-sweep.png``: trials, curves with the
exploits marked, parallel coordinates, lineage) and the console's sweep view (``sweep-view.svg``).

    python scripts/sweep_page_screenshots.py --steps 120 [--out docs/screenshots]
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from demo import _script, scratch_server, screenshot_args  # noqa: E402  (scripts/ is the script's directory)

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = """name = "pbt-demo"
project = "sweeps"
method = "pbt"
command = {command}
trials = 4
parallel = 4
[metric]
name = "val_loss"
[parameters.lr]
min = 0.001
max = 0.3
log = true
[parameters.momentum]
values = [0.0, 0.5, 0.9]
[pbt]
interval = 10
quantile = 0.25
"""


def _sweep(url: str, work: pathlib.Path, steps: int, env: dict[str, str]) -> tuple[str, subprocess.Popen]:
    command = [sys.executable, str(ROOT / "examples" / "sweep_loop.py"), "--steps", str(steps), "--step-s", "0.03",
               "--log-dir", str(work / "runs")]
    spec = work / "pbt.toml"
    spec.write_text(SPEC.format(command=json.dumps(command)))
    made = subprocess.run([_script("nissa"), "sweep", "create", str(spec), "--server", url], check=True,
                          capture_output=True, text=True, env=env)
    sweep_id = made.stdout.strip().splitlines()[-1]
    agent = subprocess.Popen([_script("nissa"), "sweep", "agent", sweep_id, "--server", url, "--slots", "4",
                              "--log-dir", str(work / "agent")], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env, cwd=work)
    return sweep_id, agent


def _wait_done(url: str, sweep_id: str, agent: subprocess.Popen) -> None:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and agent.poll() is None:
        time.sleep(1)
    with urllib.request.urlopen(f"{url}/sweeps/{sweep_id}/view", timeout=10) as reply:
        view = json.load(reply)
    print(f"sweep {sweep_id}: {view['status']}, {len(view['lineage'])} exploits")


def _web(url: str, sweep_id: str, out: pathlib.Path, chromium: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{url}/ui#sweep={sweep_id}")
        page.wait_for_selector('#sweep-view[data-ready="1"]')
        page.wait_for_timeout(800)
        page.screenshot(path=str(out / "web-sweep.png"), full_page=True)
        browser.close()


async def _console(url: str, sweep_id: str, out: pathlib.Path) -> None:
    from tui.app import EsperWatch
    from tui.client import ClientConfig
    from tui.config import WatchConfig
    from tui.screens.sweeps import SweepScreen

    app = EsperWatch(WatchConfig(client=ClientConfig(url)))
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.pause(0.5)
        screen = SweepScreen(sweep_id)
        await app.push_screen(screen)
        for _ in range(100):
            await pilot.pause(0.1)
            if screen.view is not None:
                break
        await pilot.pause(0.3)
        app.save_screenshot(str(out / "sweep-view.svg"))


def main() -> int:
    args, chromium = screenshot_args("sweep_page_screenshots", __doc__ or "")
    out = pathlib.Path(args.out)
    with scratch_server() as (work, env, url):
        sweep_id, agent = _sweep(url, work, args.steps, env)
        _wait_done(url, sweep_id, agent)
        _web(url, sweep_id, out, chromium)
        asyncio.run(_console(url, sweep_id, out))
    print(f"wrote {out}/web-sweep.png, sweep-view.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
