"""``python -m tui``: the same as ``esper-watch``."""

from tui.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
