"""``nissa``: Nissa from a shell, one subcommand each (``nissa import``).

    nissa import tensorboard runs/ --server http://127.0.0.1:8765
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence


def parser() -> argparse.ArgumentParser:
    from nissa.cli_import import add_import

    p = argparse.ArgumentParser(prog="nissa", description="Nissa from a shell.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_import(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
