"""Regenerate the web page's chart screenshots from real runs of ``examples/plain_loop.py``: a plain loop's run
page while it trains (``web-plain-live.png``), and three runs of the loop, a learning rate each, overlaid with
smoothing (``web-overlay.png``).

Starts ``nissa-server`` on a free loopback port, runs the loops against it, and opens the pages in the system's
headless chromium (through Playwright).

    python scripts/chart_screenshots.py [--steps 300] [--out docs/screenshots]
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from demo import scratch_server, screenshot_args  # noqa: E402  (scripts/ is the script's directory)

ROOT = pathlib.Path(__file__).resolve().parents[1]
RATES = ("0.01", "0.05", "0.2")
VIEWPORT = {"width": 1400, "height": 860}


def _loop(url: str, work: pathlib.Path, env: dict[str, str], name: str, lr: str, steps: int,
          delay: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "examples" / "plain_loop.py"), "--server", url, "--log-dir",
                             str(work), "--run-name", name, "--lr", lr, "--steps", str(steps), "--step-delay",
                             str(delay), "--project", "tour", "--group", "charts"],
                            stdout=subprocess.DEVNULL, env=env)


def _run_ids(url: str, names: list[str]) -> list[str]:
    """The run id of each named run, once the server lists them all."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = {r["name"]: r["run_id"] for r in httpx.get(url + "/runs").json()}
        if all(n in runs for n in names):
            return [runs[n] for n in names]
        time.sleep(0.2)
    sys.exit(f"chart_screenshots: runs {names} not listed within 60 s")


def _shoot(page, url: str, view: str, out: pathlib.Path, wait_live: bool = False) -> None:
    page.goto(f"{url}/ui#{view}")
    page.wait_for_selector('#charts[data-ready="1"] .chart[data-state="ready"]')
    if wait_live:
        page.wait_for_selector("#live:not([hidden])")
        page.wait_for_timeout(3000)  # a few live updates: the charts grow while we watch
    page.wait_for_timeout(500)
    page.screenshot(path=str(out))


def main() -> int:
    args, chromium = screenshot_args("chart_screenshots", __doc__ or "")
    from playwright.sync_api import sync_playwright

    out = pathlib.Path(args.out)
    with scratch_server() as (work, env, url):
        live = None
        try:
            for lr in RATES:
                if _loop(url, work, env, f"lr{lr}", lr, args.steps).wait() != 0:
                    sys.exit("chart_screenshots: the loop failed")
            swept = _run_ids(url, [f"lr{lr}" for lr in RATES])
            live = _loop(url, work, env, "plain-live", "0.05", 20 * args.steps, delay=0.02)
            live_id = _run_ids(url, ["plain-live"])[0]
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport=VIEWPORT)
                time.sleep(5)  # its first validations in, its first system samples taken
                _shoot(page, url, f"run={live_id}", out / "web-plain-live.png", wait_live=True)
                _shoot(page, url, f"run={swept[0]}&overlay={','.join(swept[1:])}&smooth=0.9",
                       out / "web-overlay.png")
                browser.close()
        finally:
            if live is not None:
                live.terminate()
                live.wait(30)
    print(f"wrote {out}/web-plain-live.png, web-overlay.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
