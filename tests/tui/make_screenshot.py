"""Save ``docs/screenshots/run-view.svg``: the live run view of a run streamed through a real server.

    python -m tests.tui.make_screenshot                      # the scripted run of tests/tui/scenario.py
    python -m tests.tui.make_screenshot --from-log DIR/RUN/events.jsonl   # a run esper-train logged
    python -m tests.tui.make_screenshot --from-log DIR/RUN/events.jsonl --charts   # charts.svg, its charts

Either way the events go through a real nissa-server on 127.0.0.1:0 (in-process) to esper-watch's
live view, exactly as a watcher sees them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from leyline import Event, RunFinished
from tests.support.server import running_server
from tests.tui.live_console import console, until
from tests.tui.producer import scripted_trainer
from tests.tui.scenario import scripted_run
from tui.app import read_run_log
from tui.screens.charts import ChartScreen
from tui.screens.run_view import RunViewScreen

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "run-view.svg"


async def _shoot(url: str, events: list[Event], out: Path, size: tuple[int, int], charts: bool) -> None:
    run_id = events[0].run_id
    live = [e for e in events if not isinstance(e.payload, RunFinished) and e.rank == 0]
    async with scripted_trainer(url, run_id) as trainer:
        await trainer.send(live)
        app = console(url, run_id=run_id, charts=charts)
        async with app.run_test(size=size) as pilot:
            if charts:
                screen = await until(pilot, lambda: isinstance(app.screen, ChartScreen) and app.screen, "charts")
                await until(pilot, lambda: screen.panels and all(p.ready for p in screen.panels)
                            and screen.panels[0].shown and screen.panels[0].markers_shown, "drawn")
            else:
                view = await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "view")
                await until(pilot, lambda: view.state.events_total >= len(live), "events")
            await pilot.pause(0.5)
            app.save_screenshot(filename=out.name, path=str(out.parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-log", type=Path, default=None, help="a run log written by esper-train")
    parser.add_argument("--charts", action="store_true", help="the chart view (default out: charts.svg)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--size", default="140x50", help="terminal COLUMNSxROWS (default 140x50)")
    args = parser.parse_args(argv)
    args.out = args.out or OUT.with_name("charts.svg" if args.charts else OUT.name)
    events = read_run_log(args.from_log, 200_000) if args.from_log else scripted_run(finish=False)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp)) as url:
        cols, rows = (int(n) for n in args.size.lower().split("x"))
        asyncio.run(_shoot(url, events, args.out, (cols, rows), args.charts))
    sys.stdout.write(f"wrote {args.out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
