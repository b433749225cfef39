"""``esper-watch``: the operator console, in the terminal or (``--web``) in a browser."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from platformdirs import user_state_dir

from tui.client import ClientConfig

if TYPE_CHECKING:
    from textual.app import App

DEFAULT_SERVER = "http://127.0.0.1:8765"


def _out(message: str) -> None:
    """The CLI's own voice; the app itself owns the terminal and logs to a file."""
    sys.stderr.write(message + "\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="esper-watch", description="Watch and steer training runs live: Esper's, "
                                                               "or any loop on the nissa client.")
    p.add_argument("--server", default=None,
                   help=f"nissa-server base URL (default {DEFAULT_SERVER}, or $NISSA_SERVER)")
    p.add_argument("--token", default=None, help="bearer token for escalations (default $NISSA_TOKEN)")
    p.add_argument("--run", dest="run_id", default=None,
                   help="open this run directly, waiting for it if the server does not know it yet "
                        "(default: pick one from the list)")
    p.add_argument("--replay", type=Path, default=None, metavar="EVENTS_JSONL",
                   help="replay a local run log (<log-dir>/<run_id>/events.jsonl) without a server "
                        "(default: none)")
    p.add_argument("--charts", action="store_true",
                   help="open --run RUN or --replay FILE straight on its charts (default: the run view)")
    p.add_argument("--compare", default=None, metavar="RUN_A,RUN_B[,...]",
                   help="open these runs' charts overlaid, one colour per run (default: none)")
    p.add_argument("--web", action="store_true",
                   help="serve the console in a browser (textual-serve) (default: in this terminal)")
    p.add_argument("--web-host", default="127.0.0.1", help="address --web listens on (default 127.0.0.1)")
    p.add_argument("--web-port", type=int, default=8766, help="port --web listens on (default 8766)")
    p.add_argument("--web-public-url", default=None,
                   help="URL browsers reach --web at, if proxied (default: http://WEB_HOST:WEB_PORT)")
    p.add_argument("--allow-remote", action="store_true",
                   help="let --web listen on a non-loopback address; anyone who reaches it can escalate "
                        "(default: loopback only)")
    p.add_argument("--refresh-hz", type=float, default=4.0, help="most redraws per second (default 4)")
    p.add_argument("--debug-epochs", type=int, default=3,
                   help="length in epochs of the debug window d asks for (default 3)")
    p.add_argument("--profile-batches", type=int, default=5,
                   help="batches the p form offers for a profile window (default 5)")
    p.add_argument("--log-file", type=Path, default=None,
                   help="where the console logs (default: esper-watch/log/esper-watch.log under "
                        "$XDG_STATE_HOME, or the per-user state dir)")
    return p


def default_log_file() -> Path:
    """``$XDG_STATE_HOME/esper-watch/log/esper-watch.log`` wherever that variable is set (on every system), else
    under the per-user state dir: a demo or a test points the variable at a folder of its own."""
    state = os.environ.get("XDG_STATE_HOME") or user_state_dir(appauthor=False)
    return Path(state) / "esper-watch" / "log" / "esper-watch.log"


def _configure_logging(path: Path | None) -> Path:
    path = path or default_log_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=path, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return path


def _serve_web(args: argparse.Namespace, argv: list[str]) -> int:
    from tui.web_serve import WebConsole

    try:
        loopback = ipaddress.ip_address(args.web_host).is_loopback
    except ValueError:
        loopback = args.web_host == "localhost"
    if not loopback and not args.allow_remote:
        _out(f"esper-watch: --web-host {args.web_host} is not loopback; add --allow-remote to mean it")
        return 2
    if not 1 <= args.web_port <= 65535:
        _out(f"esper-watch: --web-port must be in 1..65535, got {args.web_port}")
        return 2
    child = [a for a in argv if a != "--web"]
    for flag in ("--web-host", "--web-port", "--web-public-url", "--token"):
        # The token travels in the environment: a command line is visible to every local user.
        while flag in child:
            i = child.index(flag)
            del child[i:i + 2]
    if args.token:
        os.environ["NISSA_TOKEN"] = args.token
    command = shlex.join([sys.executable, "-m", "tui", *child])
    url = f"http://{args.web_host}:{args.web_port}"
    try:
        WebConsole(command, host=args.web_host, port=args.web_port, public_url=args.web_public_url,
                   announce=lambda: _out(f"esper-watch: serving on {url}")).serve()
    except OSError as err:  # the address is taken, or not this machine's
        _out(f"esper-watch: --web-host/--web-port: cannot listen on {args.web_host}:{args.web_port}: "
             f"{err.strerror or err}")
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.web:
        return _serve_web(args, argv)
    from tui.app import build_app
    from tui.config import WatchConfig

    token = args.token or os.environ.get("NISSA_TOKEN") or None
    try:
        server = args.server or os.environ.get("NISSA_SERVER") or DEFAULT_SERVER
        client = None if args.replay and not args.server else ClientConfig(server, token)
        compare = tuple(r.strip() for r in args.compare.split(",") if r.strip()) if args.compare else ()
        config = WatchConfig(client=client, run_id=args.run_id, replay_file=args.replay,
                             charts=args.charts, compare=compare,
                             refresh_hz=args.refresh_hz, debug_epochs=args.debug_epochs,
                             profile_batches=args.profile_batches)
    except ValueError as err:
        _out(f"esper-watch: {err}")
        return 2
    if args.replay and args.replay.is_dir():
        _out(f"esper-watch: --replay {args.replay} is a directory; a run log is "
             f"{args.replay / 'events.jsonl'} (<log-dir>/<run_id>/events.jsonl)")
        return 2
    if args.replay and not args.replay.is_file():
        _out(f"esper-watch: --replay {args.replay}: no such file")
        return 2
    try:
        log_path = _configure_logging(args.log_file)
    except OSError as err:
        _out(f"esper-watch: --log-file {args.log_file}: cannot write there: {err.strerror or err}")
        return 2
    logging.getLogger(__name__).info("esper-watch starting against %s", client.base if client else args.replay)
    try:
        app = build_app(config)
    except (OSError, ValueError) as err:
        _out(f"esper-watch: --replay {args.replay}: {err}")
        return 2
    return run_app(app, log_path)


def run_app(app: App[None], log_path: Path, *, headless: bool = False) -> int:
    """Run the console until it ends; a console stopped by an error exits nonzero and says where its log is
    (Textual prints the traceback itself once the terminal is given back)."""
    app.run(headless=headless)
    code = app.return_code or 0
    if code:
        logging.getLogger(__name__).error("esper-watch stopped on an error (exit code %d)", code)
        _out(f"esper-watch: stopped on an error (exit code {code}); its log: {log_path}")
    else:
        _out(f"esper-watch: log at {log_path}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
