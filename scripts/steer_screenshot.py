"""Regenerate ``docs/screenshots/web-steer.png`` and ``docs/screenshots/web-esper.png``: runs steered from the web
page.

Starts ``nissa-server`` on a free loopback port and ``examples/plain_loop.py`` streaming to it, opens the run's
page in the system's headless chromium (through Playwright), sends a profile window, the loop's own ``set_lr``
and a ``stacks`` from their forms, waits for them to complete, opens the profile window's table and saves the
page. Then trains a short Esper run and saves its page's panels (env grid, seed log, PPO health).

    python scripts/steer_screenshot.py [--out-dir docs/screenshots]
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from demo import _script, chromium_or_exit, scratch_server  # noqa: E402  (scripts/ is the script's directory)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _send(page, form: str, **fields: str) -> None:
    for name, value in fields.items():
        page.fill(f'{form} [name="{name}"]', value)
    page.click(f'{form} button[type="submit"]')
    page.wait_for_selector("#commands tr[data-status]")


def _steered(page, url: str, run_id: str, out: pathlib.Path) -> None:
    page.goto(f"{url}/ui#run={run_id}")
    page.wait_for_selector('#steer[data-ready="1"]')
    _send(page, 'form[data-action="profile"]', batches="3")
    _send(page, 'form[data-command="set_lr"]', value="0.02", reason="plateau")
    _send(page, 'form[data-action="stacks"]')
    for action in ("profile", "call", "stacks"):
        page.wait_for_selector(f'#commands tr[data-action="{action}"][data-status="completed"]', timeout=120_000)
    page.click('#commands tr[data-action="profile"] button.open-result')
    page.wait_for_selector('#results table.ops tbody tr')
    page.wait_for_timeout(1500)  # the charts take the latest points
    page.screenshot(path=str(out), full_page=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", default=str(ROOT / "docs" / "screenshots"))
    args = parser.parse_args()
    out_dir = pathlib.Path(args.out_dir)
    chromium = chromium_or_exit("steer_screenshot")
    from playwright.sync_api import sync_playwright

    with scratch_server() as (work, env, url):
        loop = subprocess.Popen([sys.executable, str(ROOT / "examples" / "plain_loop.py"), "--server", url,
                                 "--steps", "100000", "--step-delay", "0.01", "--log-dir", str(work / "runs")],
                                stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert loop.stdout is not None
            run_id = loop.stdout.readline().removeprefix("run id: ").strip()
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1500, "height": 1000})
                page.wait_for_timeout(3000)  # some steps to chart
                _steered(page, url, run_id, out_dir / "web-steer.png")
                subprocess.run([_script("esper-train"), "--server", url, "--log-dir", str(work), "--run-id",
                                "esper-web", "--run-name", "esper", "--rounds", "3", "--log-every", "0"],
                               check=True, env=env)
                page.goto(f"{url}/ui#run=esper-web")
                page.wait_for_selector('#esper[data-ready="1"]')
                page.wait_for_timeout(1000)
                page.locator("#esper").screenshot(path=str(out_dir / "web-esper.png"))
                browser.close()
        finally:
            loop.kill()
            loop.wait()
    print(f"wrote {out_dir / 'web-steer.png'} and {out_dir / 'web-esper.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
