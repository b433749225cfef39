"""Regenerate ``docs/screenshots/web-charts.png``: the web page's overlay of two real runs.

Starts ``nissa-server`` on a free loopback port, trains two short runs that stream to it (PPO and the
heuristic policy, same seed), opens ``/ui#run=A&overlay=B`` in the system's headless chromium (through
Playwright) and saves a screenshot of the charts.

    python scripts/web_screenshot.py [--rounds 8] [--out docs/screenshots/web-charts.png]
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from demo import _script, chromium_or_exit, scratch_server  # noqa: E402  (scripts/ is the script's directory)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "web-charts.png"))
    args = parser.parse_args()
    chromium = chromium_or_exit("web_screenshot")
    from playwright.sync_api import sync_playwright

    with scratch_server() as (work, env, url):
        runs = []
        for policy in ("ppo", "heuristic"):
            run_id = f"{policy}-web"
            subprocess.run([_script("esper-train"), "--server", url, "--log-dir", str(work), "--run-name", policy,
                            "--run-id", run_id, "--rounds", str(args.rounds), "--policy", policy,
                            "--log-every", "0"], check=True, env=env)
            runs.append(run_id)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(f"{url}/ui#run={runs[0]}&overlay={runs[1]}")
            page.wait_for_selector('#charts[data-ready="1"]')
            page.wait_for_timeout(500)
            page.screenshot(path=args.out, full_page=True)
            browser.close()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
